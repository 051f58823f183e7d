package apiv1

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/goleak"

	"github.com/talonhq/talon/internal/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenAPIDocumentValidates(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	for _, p := range []string{PathHealthz, PathReadyz, PathMetrics, PathStatus, PathCluster, PathNodes, PathNodes + "/{nodeId}", PathPlacement, PathOpenAPI, PathEvents, PathNodes + "/{nodeId}" + SuffixCordon, PathNodes + "/{nodeId}" + SuffixUncordon, PathWhoAmI, PathDebugProfile + "/{profile}", PathDebugConfig} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("document has no path %s", p)
		}
	}
	// The stated pagination bounds are the ones the code uses.
	var limit *openapi3.Parameter
	for _, p := range doc.Paths.Find(PathNodes).Get.Parameters {
		if p.Value.Name == ParamLimit {
			limit = p.Value
		}
	}
	if limit == nil {
		t.Fatal("listNodes has no limit parameter")
	}
	s := limit.Schema.Value
	if s.Min == nil || *s.Min != 1 || s.Max == nil || *s.Max != MaxLimit || s.Default != float64(DefaultLimit) {
		t.Errorf("limit schema min %v max %v default %v, want 1, %d, %d", s.Min, s.Max, s.Default, MaxLimit, DefaultLimit)
	}
}

// TestOpenAPISchemasMatchGoTypes checks that every JSON field of the Go
// wire types is in the document's schema of the same name and the other
// way round, so the two cannot drift apart silently.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]any{
		"Health": Health{}, "Error": ErrorResponse{}, "Capacity": Capacity{}, "Counters": Counters{},
		"Node": Node{}, "Counts": Counts{}, "Cluster": Cluster{}, "NodeList": NodeList{},
		"NodeResponse": NodeResponse{}, "Placement": Placement{}, "Usage": Usage{}, "Status": Status{},
		"Event": Event{}, "EventList": EventList{}, "Cordon": Cordon{}, "WhoAmI": WhoAmI{}, "VerbAccess": VerbAccess{}, "Upgrade": Upgrade{}, "VersionCount": VersionCount{},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			ref := doc.Components.Schemas[name]
			if ref == nil {
				t.Fatalf("no schema %s", name)
			}
			got := slices.Sorted(maps.Keys(ref.Value.Properties))
			want := jsonFields(t, v)
			if !slices.Equal(got, want) {
				t.Errorf("schema %s properties %v, Go type fields %v", name, got, want)
			}
		})
	}
}

// jsonFields returns the top-level JSON keys v marshals to, plus the
// omitempty ones a zero value leaves out.
func jsonFields(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Collect(maps.Keys(m))
	switch v.(type) {
	case Health:
		keys = append(keys, "reasons")
	case Event:
		keys = append(keys, "role", "nodeId", "old", "new", "reason", "revision", "id")
	case Node:
		keys = append(keys, "placementVersion", "eligibleWorkers", "agree")
	case Cluster:
		keys = append(keys, "upgrade")
	case Upgrade:
		keys = append(keys, "lowestNode")
	case WhoAmI:
		keys = append(keys, "clusterId")
	case VerbAccess:
		keys = append(keys, "reason")
	}
	slices.Sort(keys)
	return keys
}

func TestNodeFromRecord(t *testing.T) {
	rec := &cluster.Record{
		ClusterID: "c", NodeID: "w1", Role: cluster.RoleWorker, IncarnationID: "inc", Address: "10.0.0.1:7500",
		AdminAddress: "10.0.0.1:7501", Version: "v1.2.3", StartTimeUnixMs: 1000, HeartbeatSeq: 7,
		UpdatedAtUnixMs: 10_000, Health: cluster.HealthDegraded, Ready: true,
		Capacity: cluster.Capacity{CapacityBytes: 100, ResidentBytes: 50, Blocks: 3, Pages: 4, InflightLoads: 1},
		Counters: cluster.Counters{RequestsTotal: 9, HitsTotal: 5, MissesTotal: 4, StoreErrorsTotal: 2},
		Labels:   map[string]string{"zone": "a"},
	}
	tests := []struct {
		name       string
		observedAt int64
		wantAge    int64
		wantHealth string
	}{
		{"fresh keeps reported health", 11_000, 1000, "degraded"},
		{"old but unmarked keeps reported health", 13_000, 3000, "degraded"},
		{"clock skew gives age zero", 9_000, 0, "degraded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NodeFromRecord(rec, tt.observedAt)
			if n.HeartbeatAgeMs != tt.wantAge || n.Health != tt.wantHealth || n.ReportedHealth != "degraded" {
				t.Fatalf("age %d health %s reported %s, want %d %s degraded", n.HeartbeatAgeMs, n.Health, n.ReportedHealth, tt.wantAge, tt.wantHealth)
			}
			if n.NodeID != "w1" || n.Role != "worker" || n.ClusterID != "c" || n.IncarnationID != "inc" || n.Version != "v1.2.3" ||
				n.Address != "10.0.0.1:7500" || n.AdminAddress != "10.0.0.1:7501" || n.StartTimeUnixMs != 1000 ||
				n.HeartbeatSeq != 7 || n.UpdatedAtUnixMs != 10_000 || !n.Ready || n.Labels["zone"] != "a" ||
				n.Capacity.ResidentBytes != 50 || n.Capacity.CapacityBytes != 100 || n.Counters.HitsTotal != 5 || n.Counters.StoreErrorsTotal != 2 {
				t.Fatalf("converted %+v", n)
			}
		})
	}
	late := rec.Clone()
	late.Late = true
	if n := NodeFromRecord(late, 10_000); n.Health != "unhealthy" || n.ReportedHealth != "degraded" {
		t.Fatalf("late record: health %s reported %s, want unhealthy degraded", n.Health, n.ReportedHealth)
	}
	// The conversion copies labels and never yields null ones.
	n := NodeFromRecord(rec, 10_000)
	n.Labels["zone"] = "b"
	if rec.Labels["zone"] != "a" {
		t.Fatal("NodeFromRecord shares the record's label map")
	}
	rec.Labels = nil
	b, _ := json.Marshal(NodeFromRecord(rec, 10_000))
	if !strings.Contains(string(b), `"labels":{}`) {
		t.Fatalf("nil labels marshal as %s", b)
	}
}

// TestNodeJSONFields pins the field names the issue and the UI rely on.
func TestNodeJSONFields(t *testing.T) {
	b, err := json.Marshal(Node{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"nodeId", "role", "clusterId", "incarnationId", "version", "address", "adminAddress",
		"startTimeUnixMs", "heartbeatSeq", "updatedAtUnixMs", "heartbeatAgeMs", "health", "ready", "labels", "capacity", "counters"} {
		if _, ok := m[f]; !ok {
			t.Errorf("Node JSON has no %q", f)
		}
	}
	var cm map[string]json.RawMessage
	raw, _ := json.Marshal(Counters{})
	_ = json.Unmarshal(raw, &cm)
	for k := range cm {
		if !strings.HasSuffix(k, "Total") {
			t.Errorf("counter %q does not end in Total", k)
		}
	}
}

func TestU64Hex(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{{0, "0000000000000000"}, {1, "0000000000000001"}, {0xdeadbeefcafef00d, "deadbeefcafef00d"}, {^uint64(0), "ffffffffffffffff"}}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := FormatU64(tt.in); got != tt.want {
				t.Fatalf("FormatU64(%d) = %s", tt.in, got)
			}
			back, err := ParseU64(tt.want)
			if err != nil || back != tt.in {
				t.Fatalf("ParseU64(%s) = %d, %v", tt.want, back, err)
			}
		})
	}
	for _, bad := range []string{"", "123", "DEADBEEFCAFEF00D", "deadbeefcafef00", "deadbeefcafef00d0", "0x00000000000001", "+000000000000001"} {
		if _, err := ParseU64(bad); err == nil {
			t.Errorf("ParseU64(%q) accepted", bad)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 1 ", time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ParseRetryAfter(tt.in, now); got != tt.want {
				t.Fatalf("ParseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestOpenAPIMerge: the served document is openapi.json with the
// generated schemas in components.schemas and without the member naming
// their file; a schema in both, or a hand document that does not name
// the file, is an error.
func TestOpenAPIMerge(t *testing.T) {
	var doc struct {
		Components struct{ Schemas map[string]json.RawMessage }
		Named      *string `json:"x-talon-generated-schemas"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("the merged document does not parse: %v", err)
	}
	for _, name := range []string{"Capacity", "Counters", "Event", "Node"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s in the merged document", name)
		}
	}
	if doc.Named != nil {
		t.Errorf("the merged document still names the generated file")
	}
	hand := `{"x-talon-generated-schemas": "g.json", "components": {"schemas": {"A": {"type": "object"}}}}`
	if _, err := mergeOpenAPI([]byte(hand), []byte(`{"A": {"type": "string"}}`)); err == nil || !strings.Contains(err.Error(), "schema A is both") {
		t.Errorf("a schema in both: %v", err)
	}
	if _, err := mergeOpenAPI([]byte(`{"components": {"schemas": {}}}`), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "x-talon-generated-schemas") {
		t.Errorf("no member naming the generated file: %v", err)
	}
}
