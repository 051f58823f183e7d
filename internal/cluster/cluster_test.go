package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func validRecord() *Record {
	return &Record{
		ClusterID:       "prod",
		NodeID:          "worker-1",
		Role:            RoleWorker,
		IncarnationID:   "3f2a9c",
		Address:         "10.0.0.1:7500",
		AdminAddress:    "10.0.0.1:7501",
		Version:         "v1.2.3",
		StartTimeUnixMs: 1_700_000_000_000,
		HeartbeatSeq:    7,
		UpdatedAtUnixMs: 1_700_000_005_000,
		Health:          HealthHealthy,
		Ready:           true,
		Capacity:        Capacity{CapacityBytes: 1 << 30, ResidentBytes: 1 << 20, Blocks: 4},
		Counters:        Counters{RequestsTotal: 10, HitsTotal: 6, MissesTotal: 4},
		Labels:          map[string]string{"zone": "a", "region": "eu-west-1"},
	}
}

func TestValidateLimits(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(r *Record)
		wantErr string // substring; empty means valid
	}{
		{"valid", func(r *Record) {}, ""},
		{"node id at limit", func(r *Record) { r.NodeID = strings.Repeat("n", MaxIDBytes) }, ""},
		{"node id one past", func(r *Record) { r.NodeID = strings.Repeat("n", MaxIDBytes+1) }, "nodeId of 257 bytes: must be at most 256 bytes"},
		{"node id empty", func(r *Record) { r.NodeID = "" }, "nodeId"},
		{"node id slash", func(r *Record) { r.NodeID = "a/b" }, "only letters, digits"},
		{"cluster id one past", func(r *Record) { r.ClusterID = strings.Repeat("c", MaxIDBytes+1) }, "clusterId of 257 bytes"},
		{"incarnation at limit", func(r *Record) { r.IncarnationID = strings.Repeat("i", MaxIDBytes) }, ""},
		{"incarnation one past", func(r *Record) { r.IncarnationID = strings.Repeat("i", MaxIDBytes+1) }, "incarnationId of 257 bytes: must be at most 256 bytes"},
		{"incarnation empty", func(r *Record) { r.IncarnationID = "" }, "incarnationId"},
		{"version at limit", func(r *Record) { r.Version = strings.Repeat("v", MaxVersionBytes) }, ""},
		{"version one past", func(r *Record) { r.Version = strings.Repeat("v", MaxVersionBytes+1) }, "version of 257 bytes: must be at most 256 bytes"},
		{"address at limit", func(r *Record) { r.Address = longHost("h", MaxAddressBytes-5) + ":7500" }, ""},
		{"address with markup", func(r *Record) { r.Address = "<script>alert(1)</script>:80" }, "host must be an IP address or a DNS name"},
		{"address with a label past 63", func(r *Record) { r.Address = strings.Repeat("h", 64) + ":80" }, "host must be an IP address or a DNS name"},
		{"IPv6 address", func(r *Record) { r.Address = "[2001:db8::1]:7500" }, ""},
		{"address one past", func(r *Record) { r.Address = strings.Repeat("h", MaxAddressBytes-4) + ":7500" }, "address of 257 bytes: must be at most 256 bytes"},
		{"admin address one past", func(r *Record) { r.AdminAddress = strings.Repeat("h", MaxAddressBytes-4) + ":7501" }, "adminAddress of 257 bytes"},
		{"address without port", func(r *Record) { r.Address = "host" }, "must be host:port"},
		{"address wildcard", func(r *Record) { r.Address = ":7500" }, "must name a host"},
		{"address bad port", func(r *Record) { r.Address = "h:70000" }, "port must be"},
		{"admin address optional", func(r *Record) { r.AdminAddress = "" }, ""},
		{"labels at limit", func(r *Record) { r.Labels = nLabels(MaxLabels) }, ""},
		{"labels one past", func(r *Record) { r.Labels = nLabels(MaxLabels + 1) }, "labels with 17 entries: must have at most 16 labels"},
		{"label key at limit", func(r *Record) { r.Labels = map[string]string{strings.Repeat("k", MaxLabelKeyBytes): "v"} }, ""},
		{"label key one past", func(r *Record) { r.Labels = map[string]string{strings.Repeat("k", MaxLabelKeyBytes+1): "v"} }, "of 64 bytes: must be at most 63 bytes"},
		{"label key syntax", func(r *Record) { r.Labels = map[string]string{"-zone": "v"} }, "must start and end"},
		{"label key space", func(r *Record) { r.Labels = map[string]string{"zo ne": "v"} }, "only letters"},
		{"label value at limit", func(r *Record) { r.Labels = map[string]string{"k": strings.Repeat("v", MaxLabelValueBytes)} }, ""},
		{"label value one past", func(r *Record) { r.Labels = map[string]string{"k": strings.Repeat("v", MaxLabelValueBytes+1)} }, "labels[k] of 257 bytes: must be at most 256 bytes"},
		{"label value control char", func(r *Record) { r.Labels = map[string]string{"k": "a\nb"} }, "control characters"},
		{"version C1 control char", func(r *Record) { r.Version = "v1\u0085" }, "control characters (U+0085"},
		{"version bidi override", func(r *Record) { r.Version = "v1\u202eevil" }, "bidirectional control characters (U+202E"},
		{"label value bidi isolate", func(r *Record) { r.Labels = map[string]string{"k": "a\u2066b"} }, "bidirectional control characters (U+2066"},
		{"bad role", func(r *Record) { r.Role = "leader" }, "role \"leader\": must be coordinator or worker"},
		{"bad health", func(r *Record) { r.Health = "fine" }, "health"},
		{"negative start", func(r *Record) { r.StartTimeUnixMs = -1 }, "startTimeUnixMs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validRecord()
			tt.mutate(r)
			err := r.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
			}
		})
	}
}

func nLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

// maxRecord fills every bounded field to its limit.
func maxRecord() *Record {
	r := validRecord()
	r.NodeID = strings.Repeat("n", MaxIDBytes)
	r.ClusterID = strings.Repeat("c", MaxIDBytes)
	r.IncarnationID = strings.Repeat("i", MaxIDBytes)
	r.Version = strings.Repeat("v", MaxVersionBytes)
	r.Address = longHost("a", MaxAddressBytes-5) + ":7500"
	r.AdminAddress = longHost("b", MaxAddressBytes-5) + ":7501"
	r.Labels = map[string]string{}
	for i := range MaxLabels {
		k := fmt.Sprintf("%02d", i) + strings.Repeat("k", MaxLabelKeyBytes-2)
		r.Labels[k] = strings.Repeat("v", MaxLabelValueBytes)
	}
	return r
}

func TestRecordSizeLimit(t *testing.T) {
	// A record with every field at its limit must still fit the 16 KiB bound:
	// the per-field limits and the record limit must agree.
	b, err := Encode(maxRecord())
	if err != nil {
		t.Fatalf("Encode(max record) = %v", err)
	}
	if len(b) > MaxRecordBytes {
		t.Fatalf("max record encodes to %d bytes, over %d", len(b), MaxRecordBytes)
	}
	// Escaped characters blow up the encoded size: characters such as "<" are
	// valid text but cost six bytes each (\u003c).
	r := maxRecord()
	for k := range r.Labels {
		r.Labels[k] = strings.Repeat("<", MaxLabelValueBytes)
	}
	err = r.Validate()
	if err == nil || !strings.Contains(err.Error(), "must be at most 16384 bytes") {
		t.Fatalf("Validate(escaped max record) = %v, want record size error", err)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, r := range []*Record{validRecord(), maxRecord()} {
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		b2, _ := Encode(got)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the encoding:\n%s\n%s", b, b2)
		}
		if got.Labels["zone"] != r.Labels["zone"] || got.Counters != r.Counters || got.Capacity != r.Capacity {
			t.Fatalf("round trip lost fields: %+v", got)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(validRecord())
	if err != nil {
		t.Fatal(err)
	}
	newer := strings.Replace(string(good), `"schemaVersion":1`, `"schemaVersion":2`, 1)
	older := strings.Replace(string(good), `"schemaVersion":1`, `"schemaVersion":0`, 1)
	// A newer version may have fields this build would misread; the version
	// check must happen before any of them is looked at.
	newerGarbage := `{"schemaVersion":2,"nodeId":12345,"labels":"not a map"}`
	tests := []struct {
		name    string
		in      string
		wantIs  error
		wantVer int
	}{
		{"newer version", newer, ErrUnsupportedVersion, 2},
		{"older version", older, ErrUnsupportedVersion, 0},
		{"newer version with incompatible fields", newerGarbage, ErrUnsupportedVersion, 2},
		{"missing version", `{"nodeId":"a"}`, ErrMalformed, 0},
		{"not json", `\x00\x01`, ErrMalformed, 0},
		{"trailing data", string(good) + `{}`, ErrMalformed, 0},
		// encoding/json's Decoder.More let this through; Decode refuses
		// all trailing data (see the package doc).
		{"trailing brace", string(good) + ` }`, ErrMalformed, 0},
		{"trailing bracket", string(good) + `]`, ErrMalformed, 0},
		{"repeated version then trailing data", `{"schemaVersion":1,"schemaVersion":2,` + string(good[len(canonicalPrefix):]) + `x`, ErrUnsupportedVersion, 2},
		{"wrong type", strings.Replace(string(good), `"heartbeatSeq":7`, `"heartbeatSeq":"7"`, 1), ErrMalformed, 0},
		{"invalid field", strings.Replace(string(good), `"role":"worker"`, `"role":"boss"`, 1), ErrInvalid, 0},
		{"too large", `{"schemaVersion":1,"x":"` + strings.Repeat("a", MaxRecordBytes) + `"}`, ErrMalformed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Decode([]byte(tt.in))
			if r != nil {
				t.Fatalf("Decode returned a record with error %v", err)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Decode error = %v, want errors.Is %v", err, tt.wantIs)
			}
			var ve *VersionError
			if errors.As(err, &ve) && ve.Version != tt.wantVer {
				t.Fatalf("VersionError.Version = %d, want %d", ve.Version, tt.wantVer)
			}
		})
	}
}

func TestDecodeIgnoresAdditiveFields(t *testing.T) {
	good, _ := Encode(validRecord())
	withExtra := strings.Replace(string(good), `{"schemaVersion":1,`, `{"schemaVersion":1,"futureField":{"a":1},`, 1)
	r, err := Decode([]byte(withExtra))
	if err != nil || r.NodeID != "worker-1" {
		t.Fatalf("Decode(additive field) = %v, %v", r, err)
	}
}

func TestOrder(t *testing.T) {
	stored := &Record{IncarnationID: "a", HeartbeatSeq: 5, Superseded: []string{"old"}}
	const reg, hb = UpdateRegister, UpdateHeartbeat
	tests := []struct {
		name     string
		stored   *Record
		incoming *Record
		u        Update
		want     Decision
	}{
		{"register, no record", nil, &Record{IncarnationID: "a"}, reg, DecisionInsert},
		{"heartbeat, no record", nil, &Record{IncarnationID: "a", HeartbeatSeq: 3}, hb, DecisionUnregistered},
		{"zero update registers", nil, &Record{IncarnationID: "a"}, 0, DecisionInsert},
		{"register new incarnation lower seq", stored, &Record{IncarnationID: "b", StartTimeUnixMs: 1}, reg, DecisionRestart},
		{"register new incarnation higher seq", stored, &Record{IncarnationID: "b", HeartbeatSeq: 9, StartTimeUnixMs: 1}, reg, DecisionRestart},
		{"heartbeat of another incarnation", stored, &Record{IncarnationID: "b", HeartbeatSeq: 9}, hb, DecisionSuperseded},
		{"register of a superseded incarnation", stored, &Record{IncarnationID: "old", HeartbeatSeq: 99}, reg, DecisionSuperseded},
		{"same incarnation next seq", stored, &Record{IncarnationID: "a", HeartbeatSeq: 6}, hb, DecisionAdvance},
		{"same incarnation registers again", stored, &Record{IncarnationID: "a", HeartbeatSeq: 6}, reg, DecisionAdvance},
		{"same incarnation jump", stored, &Record{IncarnationID: "a", HeartbeatSeq: 1 << 60}, hb, DecisionAdvance},
		{"duplicate", stored, &Record{IncarnationID: "a", HeartbeatSeq: 5}, hb, DecisionDuplicate},
		{"stale", stored, &Record{IncarnationID: "a", HeartbeatSeq: 4}, hb, DecisionStale},
		{"stale zero", stored, &Record{IncarnationID: "a", HeartbeatSeq: 0}, reg, DecisionStale},
		// A registration of a process that started before the holder is a
		// delayed registration of an older process (a crash loop outruns
		// any superseded list): refused, whatever the list holds.
		{"registration of a process that started before the holder", &Record{IncarnationID: "a", HeartbeatSeq: 5, StartTimeUnixMs: 100_000}, &Record{IncarnationID: "b", StartTimeUnixMs: 40_000}, reg, DecisionSuperseded},
		{"registration of an earlier-started process over a late holder", &Record{IncarnationID: "a", HeartbeatSeq: 5, StartTimeUnixMs: 100_000, Late: true}, &Record{IncarnationID: "b", StartTimeUnixMs: 40_000}, reg, DecisionRestart},
		{"registration of a process that started with the holder", &Record{IncarnationID: "a", HeartbeatSeq: 5, StartTimeUnixMs: 100_000}, &Record{IncarnationID: "b", StartTimeUnixMs: 100_000}, reg, DecisionRestart},
		// A registration without a start time proves nothing about its
		// age: it never displaces a live, on-time holder (issue 47), only
		// a late one.
		{"no start time over a live holder", &Record{IncarnationID: "a", HeartbeatSeq: 5, StartTimeUnixMs: 100}, &Record{IncarnationID: "b"}, reg, DecisionSuperseded},
		{"no start time over a live holder without one", &Record{IncarnationID: "a", HeartbeatSeq: 5}, &Record{IncarnationID: "b"}, reg, DecisionSuperseded},
		{"no start time over a late holder", &Record{IncarnationID: "a", HeartbeatSeq: 5, StartTimeUnixMs: 100, Late: true}, &Record{IncarnationID: "b"}, reg, DecisionRestart},
		{"holder without a start time", &Record{IncarnationID: "a", HeartbeatSeq: 5}, &Record{IncarnationID: "b", StartTimeUnixMs: 100}, reg, DecisionRestart},
		{"delayed heartbeat of the previous process", &Record{IncarnationID: "b", Superseded: []string{"a"}}, &Record{IncarnationID: "a", HeartbeatSeq: 99, StartTimeUnixMs: 1 << 50}, hb, DecisionSuperseded},
		{"delayed registration of the previous process", &Record{IncarnationID: "b", Superseded: []string{"a"}}, &Record{IncarnationID: "a", StartTimeUnixMs: 1 << 50}, reg, DecisionSuperseded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Order(tt.stored, tt.incoming, tt.u)
			if got != tt.want {
				t.Fatalf("Order = %v, want %v", got, tt.want)
			}
			if want := tt.want == DecisionInsert || tt.want == DecisionRestart || tt.want == DecisionAdvance; got.Accepted() != want {
				t.Fatalf("%v.Accepted() = %v", got, got.Accepted())
			}
		})
	}
}

// TestOrderExhaustive checks the rule over every pair from a small domain
// against its definition.
func TestOrderExhaustive(t *testing.T) {
	incs := []string{"a", "b"}
	for _, u := range []Update{UpdateRegister, UpdateHeartbeat} {
		for _, si := range incs {
			for ss := uint64(0); ss < 4; ss++ {
				for _, ii := range incs {
					for is := uint64(0); is < 4; is++ {
						s := &Record{IncarnationID: si, HeartbeatSeq: ss, StartTimeUnixMs: 1}
						in := &Record{IncarnationID: ii, HeartbeatSeq: is, StartTimeUnixMs: 1}
						want := si == ii && is > ss || si != ii && u == UpdateRegister
						if got := Order(s, in, u).Accepted(); got != want {
							t.Errorf("Order(%s/%d, %s/%d, %d).Accepted() = %v, want %v", si, ss, ii, is, u, got, want)
						}
					}
				}
			}
		}
	}
}

func TestNext(t *testing.T) {
	in := &Record{IncarnationID: "e", HeartbeatSeq: 3, Generation: 999, Superseded: []string{"forged"}}
	tests := []struct {
		name      string
		prev      *Record
		d         Decision
		floor     uint64
		wantGen   uint64
		wantSuper []string
	}{
		{"insert", nil, DecisionInsert, 0, 1, nil},
		{"insert above the backend floor", nil, DecisionInsert, 41, 42, nil},
		{"insert over an expired record", &Record{IncarnationID: "d", Generation: 7}, DecisionInsert, 0, 8, []string{"d"}},
		{"restart", &Record{IncarnationID: "d", Generation: 7, Superseded: []string{"c", "b"}}, DecisionRestart, 3, 8, []string{"d", "c", "b"}},
		{"restart keeps at most MaxSuperseded", &Record{IncarnationID: "d", Generation: 7, Superseded: []string{"c", "b", "a", "z"}}, DecisionRestart, 0, 8, []string{"d", "c", "b", "a"}},
		{"advance keeps the generation", &Record{IncarnationID: "e", Generation: 7, Superseded: []string{"d"}}, DecisionAdvance, 100, 7, []string{"d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(tt.prev, in, tt.d, tt.floor)
			if got.Generation != tt.wantGen || !slices.Equal(got.Superseded, tt.wantSuper) {
				t.Fatalf("Next = generation %d superseded %q, want %d %q", got.Generation, got.Superseded, tt.wantGen, tt.wantSuper)
			}
			if got == in || got.IncarnationID != "e" || got.HeartbeatSeq != 3 {
				t.Fatalf("Next did not copy the incoming record: %+v", got)
			}
		})
	}
	if in.Generation != 999 || len(in.Superseded) != 1 {
		t.Fatal("Next modified its input")
	}
}

func TestSupersededLimits(t *testing.T) {
	r := validRecord()
	r.Superseded = []string{"a", "b", "c", "d", "e"}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "superseded with 5 entries: must have at most 4 entries") {
		t.Fatalf("Validate(5 superseded) = %v", err)
	}
	r.Superseded = []string{"a", ""}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "superseded[1]") {
		t.Fatalf("Validate(empty superseded id) = %v", err)
	}
}

func TestTimingValidate(t *testing.T) {
	s := time.Second
	tests := []struct {
		name    string
		t       Timing
		wantErr string
	}{
		{"defaults", DefaultTiming(), ""},
		{"tight but ordered", Timing{1 * s, 2 * s, 3 * s, 0}, ""},
		{"heartbeat equals unhealthy", Timing{15 * s, 15 * s, 30 * s, 0}, "heartbeat-interval 15s must be less than unhealthy-after 15s"},
		{"heartbeat over unhealthy", Timing{20 * s, 15 * s, 30 * s, 0}, "heartbeat-interval 20s must be less than unhealthy-after 15s"},
		{"unhealthy equals ttl", Timing{5 * s, 30 * s, 30 * s, 0}, "unhealthy-after 30s must be less than lease-ttl 30s"},
		{"zero heartbeat", Timing{0, 15 * s, 30 * s, 0}, "heartbeat-interval 0s: must be positive"},
		{"status every heartbeat", Timing{5 * s, 15 * s, 30 * s, 0}, ""},
		{"status below heartbeat", Timing{5 * s, 15 * s, 30 * s, 2 * s}, "status-interval 2s must be 0 (every heartbeat writes the record) or at least heartbeat-interval 5s"},
		{"negative status", Timing{5 * s, 15 * s, 30 * s, -s}, "status-interval -1s must be 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestEffectiveHealth(t *testing.T) {
	for _, h := range HealthStates() {
		r := validRecord()
		r.Health = h
		if got := r.EffectiveHealth(); got != h {
			t.Fatalf("unmarked record reporting %s: EffectiveHealth = %s", h, got)
		}
		r.Late = true
		if got := r.EffectiveHealth(); got != HealthUnhealthy {
			t.Fatalf("late record reporting %s: EffectiveHealth = %s, want unhealthy", h, got)
		}
	}
}

func TestParseRoleHealth(t *testing.T) {
	if _, err := ParseRole("worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRole("Worker"); err == nil {
		t.Fatal("ParseRole(Worker) accepted a wrong-case role")
	}
	if _, err := ParseHealth("degraded"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHealth("ok"); err == nil || !strings.Contains(err.Error(), "healthy, degraded") {
		t.Fatalf("ParseHealth(ok) = %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(validRecord())
	max, _ := Encode(maxRecord())
	f.Add(good)
	f.Add(max)
	f.Add([]byte(`{"schemaVersion":2}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if r != nil {
				t.Fatal("Decode returned a record together with an error")
			}
			return
		}
		// Whatever decodes must be valid and re-encode within the limit,
		// and re-decode to the same encoding.
		enc, err := Encode(r)
		if err != nil {
			// Only the encoded size may differ from the input's (JSON
			// escapes some characters the input may carry raw).
			var fe *FieldError
			if errors.As(err, &fe) && fe.Field == "record" {
				return
			}
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		r2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		enc2, _ := Encode(r2)
		if string(enc) != string(enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}

func TestNewIncarnationID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewIncarnationID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("NewIncarnationID = %q, want 32 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewIncarnationID repeated %q", id)
		}
		seen[id] = true
	}
}

// A record whose first key says this build's version but whose repeated
// key says another is refused: JSON keeps the last key, so the fast path
// must not trust the prefix alone.
func TestDecodeRepeatedSchemaVersion(t *testing.T) {
	b, err := Encode(validRecord())
	if err != nil {
		t.Fatal(err)
	}
	forged := append([]byte(`{"schemaVersion":1,"schemaVersion":2,`), b[len(`{"schemaVersion":1,`):]...)
	if _, err := Decode(forged); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Decode(repeated schemaVersion 1 then 2) = %v, want ErrUnsupportedVersion", err)
	}
	if r, err := Decode(b); err != nil || r.NodeID != validRecord().NodeID {
		t.Fatalf("Decode(canonical) = %v, %v", r, err)
	}
}

func TestValidateTolerance(t *testing.T) {
	tests := []struct {
		name    string
		t       Timing
		request time.Duration
		wantErr bool
	}{
		{"defaults with the default request timeout", DefaultTiming(), 2 * time.Second, false},
		{"exactly the rule", Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4 * time.Second, LeaseTTL: 8 * time.Second}, 2 * time.Second, false},
		{"one millisecond short", Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 4*time.Second - time.Millisecond, LeaseTTL: 8 * time.Second}, 2 * time.Second, true},
		{"the old dev timing", Timing{HeartbeatInterval: time.Second, UnhealthyAfter: 3 * time.Second, LeaseTTL: 6 * time.Second}, 2 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.ValidateTolerance(tt.request)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ValidateTolerance = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				for _, want := range []string{"unhealthy-after " + tt.t.UnhealthyAfter.String(), "heartbeat-interval " + tt.t.HeartbeatInterval.String(), "request-timeout " + tt.request.String(), "rule:"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not name %q", err, want)
					}
				}
			}
		})
	}
}

// longHost returns a DNS name of n bytes of c: labels of 63, dot-separated.
func longHost(c string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.Repeat(c, min(63, n-b.Len())))
	}
	return b.String()
}

func TestNeedsStatusWrite(t *testing.T) {
	stored := validRecord()
	stored.HeartbeatSeq = 10
	with := func(f func(r *Record)) *Record {
		r := stored.Clone()
		r.HeartbeatSeq = 11
		f(r)
		return r
	}
	late := stored.Clone()
	late.Late = true
	tests := []struct {
		name        string
		stored, in  *Record
		statusEvery uint64
		want        bool
	}{
		{"counters only", stored, with(func(r *Record) { r.Counters.HitsTotal += 9; r.Capacity.ResidentBytes++ }), 12, false},
		{"every heartbeat writes", stored, with(func(*Record) {}), 0, true},
		{"status interval reached", stored, with(func(r *Record) { r.HeartbeatSeq = 22 }), 12, true},
		{"just before the interval", stored, with(func(r *Record) { r.HeartbeatSeq = 21 }), 12, false},
		{"late mark to clear", late, with(func(*Record) {}), 12, true},
		{"no record", nil, with(func(*Record) {}), 12, true},
		{"health", stored, with(func(r *Record) { r.Health = HealthDegraded }), 12, true},
		{"ready", stored, with(func(r *Record) { r.Ready = !r.Ready }), 12, true},
		{"reason", stored, with(func(r *Record) { r.NotReadyReason = "cordoned" }), 12, true},
		{"address", stored, with(func(r *Record) { r.Address = "127.0.0.9:1" }), 12, true},
		{"admin address", stored, with(func(r *Record) { r.AdminAddress = "127.0.0.9:2" }), 12, true},
		{"version", stored, with(func(r *Record) { r.Version = "v9" }), 12, true},
		{"capacity", stored, with(func(r *Record) { r.Capacity.CapacityBytes++ }), 12, true},
		{"store health", stored, with(func(r *Record) { r.Capacity.StoreHealthy = !r.Capacity.StoreHealthy }), 12, true},
		{"labels", stored, with(func(r *Record) { r.Labels = map[string]string{"zone": "b"} }), 12, true},
		{"older sequence", stored, with(func(r *Record) { r.HeartbeatSeq = 9 }), 12, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsStatusWrite(tt.stored, tt.in, tt.statusEvery); got != tt.want {
				t.Fatalf("NeedsStatusWrite = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusEvery(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		t    Timing
		want uint64
	}{
		{Timing{5 * s, 15 * s, 30 * s, time.Minute}, 12},
		{Timing{7 * s, 15 * s, 30 * s, time.Minute}, 9},
		{Timing{5 * s, 15 * s, 30 * s, 5 * s}, 1},
		{Timing{5 * s, 15 * s, 30 * s, 0}, 0},
	} {
		if got := tt.t.StatusEvery(); got != tt.want {
			t.Errorf("%+v.StatusEvery() = %d, want %d", tt.t, got, tt.want)
		}
	}
}

func TestMarksRoundTripAndCarry(t *testing.T) {
	r := validRecord()
	r.Drained, r.CordonedBy, r.CordonedAtUnixMs, r.CordonPersist = true, "token:ops", 1_784_800_000_123, true
	r.RevokedBy, r.RevokedReason, r.CredentialSerial = "coord-a", "serial:1f", "1f"
	r.StatusAtUnixMs = 1_784_800_000_456
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
	}
	// A heartbeat cannot clear or set the marks; a restart keeps the
	// cordon and drops the revocation; a new record takes the process's
	// own (persisted) cordon.
	hb := validRecord()
	hb.HeartbeatSeq = r.HeartbeatSeq + 1
	hb.CordonedBy, hb.RevokedBy = "", ""
	if n := Next(r, hb, DecisionAdvance, 0); n.CordonedBy != "token:ops" || !n.CordonPersist || n.RevokedBy != "coord-a" {
		t.Fatalf("advance lost the marks: %+v", n)
	}
	rst := validRecord()
	rst.IncarnationID = "another"
	if n := Next(r, rst, DecisionRestart, 0); n.CordonedBy != "token:ops" || n.RevokedBy != "" || n.RevokedReason != "" {
		t.Fatalf("restart: cordon %q revoked %q, want the cordon kept and no revocation", n.CordonedBy, n.RevokedBy)
	}
	own := validRecord()
	own.CordonedBy = "token:ops"
	if n := Next(nil, own, DecisionInsert, 0); n.CordonedBy != "token:ops" {
		t.Fatalf("insert dropped the process's persisted cordon: %+v", n)
	}
	bad := r.Clone()
	bad.CordonedBy = strings.Repeat("x", MaxIDBytes+1)
	if _, err := Encode(bad); err == nil || !strings.Contains(err.Error(), "cordonedBy") {
		t.Fatalf("Encode of an over-long cordonedBy = %v, want an error naming the field", err)
	}
	bad = r.Clone()
	bad.StatusAtUnixMs = -1
	if _, err := Encode(bad); err == nil || !strings.Contains(err.Error(), "statusAtUnixMs") {
		t.Fatalf("Encode of a negative statusAtUnixMs = %v, want an error naming the field", err)
	}
}

// TestRevocationFollowsTheCredential: a registration of a new incarnation
// keeps the slot's revocation when it comes with the revoked credential
// (issue 47), and starts unrevoked with another credential or none.
func TestRevocationFollowsTheCredential(t *testing.T) {
	prev := validRecord()
	prev.CredentialSerial, prev.RevokedBy, prev.RevokedReason = "0a1b", "coord-a", "serial:0a1b"
	for _, tc := range []struct {
		name, serial string
		revoked      bool
	}{{"same credential", "0a1b", true}, {"another credential", "ffee", false}, {"no credential", "", false}} {
		t.Run(tc.name, func(t *testing.T) {
			in := validRecord()
			in.IncarnationID, in.CredentialSerial, in.StartTimeUnixMs = "inc-new", tc.serial, prev.StartTimeUnixMs+1
			next := Next(prev, in, DecisionRestart, 0)
			if next.Revoked() != tc.revoked || (tc.revoked && (next.RevokedBy != "coord-a" || next.RevokedReason != "serial:0a1b")) {
				t.Fatalf("revoked %v (%q, %q); want %v", next.Revoked(), next.RevokedBy, next.RevokedReason, tc.revoked)
			}
		})
	}
	// An unrevoked slot gives nothing to carry.
	clean := validRecord()
	clean.CredentialSerial = "0a1b"
	in := validRecord()
	in.IncarnationID, in.CredentialSerial = "inc-new", "0a1b"
	if Next(clean, in, DecisionRestart, 0).Revoked() {
		t.Fatal("a registration over an unrevoked slot came out revoked")
	}
}
