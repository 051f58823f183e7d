package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// EnvJaegerBin names a prebuilt Jaeger binary; when unset, JaegerBinary
// runs build-jaeger.sh, which builds it from its Go module once and caches
// it.
const EnvJaegerBin = "TALON_JAEGER_BIN"

// JaegerBinary returns the path of the Jaeger (v2, all-in-one) binary:
// $TALON_JAEGER_BIN when set, otherwise the one build-jaeger.sh builds (or
// finds in its cache). It fails t when neither yields an executable file;
// it never skips.
func JaegerBinary(t testing.TB) string {
	t.Helper()
	return toolBinary(t, EnvJaegerBin, "build-jaeger.sh", "jaeger")
}

// Jaeger is a running Jaeger all-in-one on 127.0.0.1: OTLP receivers over
// HTTP and gRPC, in-memory storage and the query API.
type Jaeger struct {
	p *proc
	// OTLPHTTP is http://127.0.0.1:PORT, the OTLP/HTTP receiver (an
	// OTEL_EXPORTER_OTLP_ENDPOINT value); OTLPGRPC is its gRPC twin.
	OTLPHTTP, OTLPGRPC string
	// Query is http://127.0.0.1:PORT, the query service (/api/traces).
	Query string
}

// jaegerConfig is an all-in-one configuration with every listener on the
// ports given and the collector's own telemetry off (it would take a
// fixed port).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// StartJaeger starts Jaeger and waits until its query service answers.
// A cleanup kills it.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	bin := JaegerBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "jaeger.yaml")
	j := &Jaeger{p: &proc{name: "jaeger", bin: bin, logPath: filepath.Join(dir, "jaeger.log"), env: childEnv()}}
	// The first port is the OTLP/HTTP receiver's: the one waited for.
	ports := startOnFreePort(t, j.p, 4, func(ports []int) []string {
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, jaegerConfig, ports[1], ports[2], ports[0], ports[3]), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"--config", "file:" + cfgPath}
	})
	j.OTLPHTTP = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	j.Query = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	j.OTLPGRPC = fmt.Sprintf("http://127.0.0.1:%d", ports[3])
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := j.Services(context.Background()); err == nil {
			return j
		} else if time.Now().After(deadline) {
			t.Fatalf("testenv: jaeger query at %s did not answer within 90s: %v", j.Query, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Span is one span of a trace as the query API returns it.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	ProcessID string `json:"processID"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// Tag returns the value of span tag key, or nil.
func (s Span) Tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// Parent returns the span ID of s's parent, "" for a root span.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Trace is one trace: its spans and the processes (services) they came from.
type Trace struct {
	TraceID   string `json:"traceID"`
	Spans     []Span `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

// Services lists the services Jaeger has spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var out struct {
		Data []string `json:"data"`
	}
	err := j.get(ctx, "/api/services", &out)
	return out.Data, err
}

// Traces returns up to limit recent traces of service, optionally only
// those with a span named operation ("" for any).
func (j *Jaeger) Traces(ctx context.Context, service, operation string, limit int) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {fmt.Sprint(limit)}, "lookback": {"1h"}}
	if operation != "" {
		q.Set("operation", operation)
	}
	var out struct {
		Data []Trace `json:"data"`
	}
	err := j.get(ctx, "/api/traces?"+q.Encode(), &out)
	return out.Data, err
}

// TraceByID returns one trace, or an error when Jaeger has none of that ID.
func (j *Jaeger) TraceByID(ctx context.Context, id string) (Trace, error) {
	var out struct {
		Data []Trace `json:"data"`
	}
	if err := j.get(ctx, "/api/traces/"+url.PathEscape(id), &out); err != nil {
		return Trace{}, err
	}
	if len(out.Data) == 0 {
		return Trace{}, fmt.Errorf("jaeger has no trace %s", id)
	}
	return out.Data[0], nil
}

func (j *Jaeger) get(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
