package otlp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/talonhq/talon/internal/redact"
)

// Process names the process the spans come from (the resource).
type Process struct {
	// Role is "coordinator", "worker" or a command ("get").
	Role      string
	NodeID    string
	ClusterID string
	Version   string
}

// Provider hands out tracers; when tracing is off they are no-ops.
type Provider struct {
	sdk      *sdktrace.TracerProvider // nil when off
	exporter string                   // what Describe says
}

// Setting is how the environment configures tracing, decided from
// getenv alone (no I/O).
type Setting struct {
	On       bool
	Protocol string // "http/protobuf" or "grpc" when On
	// Endpoint is the OTLP endpoint variable's value, "" for the default.
	// It may hold a password in its userinfo: show it only through
	// redact.URL.
	Endpoint string
}

// Protocols are the OTLP protocols Talon exports over.
var protocols = []string{"http/protobuf", "grpc"}

// Decide reads the OTEL_* variables that choose whether and how Talon
// exports traces. An unknown exporter or protocol is an error naming the
// variable, its value and the values allowed.
func Decide(getenv func(string) string) (Setting, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Setting{}, nil
	}
	endpoint := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		if endpoint == "" {
			return Setting{}, nil
		}
	case "none":
		return Setting{}, nil
	case "otlp":
	default:
		return Setting{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Talon exports traces only with otlp (or none to turn tracing off)", exp)
	}
	protoVar := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	proto := strings.TrimSpace(getenv(protoVar))
	if proto == "" {
		protoVar, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", cmp.Or(strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL")), "http/protobuf")
	}
	if proto != protocols[0] && proto != protocols[1] {
		return Setting{}, fmt.Errorf("%s=%q: must be one of %s", protoVar, proto, strings.Join(protocols, ", "))
	}
	return Setting{On: true, Protocol: proto, Endpoint: endpoint}, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// New returns the Provider the environment asks for. It does no network
// I/O: the exporter connects when it first sends.
func New(ctx context.Context, getenv func(string) string, p Process) (*Provider, error) {
	set, err := Decide(getenv)
	if err != nil || !set.On {
		return &Provider{}, err
	}
	var exp *otlptrace.Exporter
	if set.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		var hc *http.Client
		if hc, err = exportClient(getenv); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithHTTPClient(hc))
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", set.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(processAttrs(p)...),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	desc := "otlp " + set.Protocol
	if set.Endpoint != "" {
		desc += " to " + redact.URL(set.Endpoint) // its userinfo may hold a password
	}
	return &Provider{sdk: sdk, exporter: desc}, nil
}

func processAttrs(p Process) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("service.name", "talon-"+p.Role)}
	for k, v := range map[string]string{"service.instance.id": p.NodeID, "service.version": p.Version, "talon.cluster": p.ClusterID, "talon.role": p.Role} {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	return attrs
}

// Tracers returns the tracer provider: the SDK's, or a no-op one when off.
// Nil-safe: a nil Provider is off.
func (p *Provider) Tracers() trace.TracerProvider {
	if p == nil || p.sdk == nil {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// On reports whether spans are exported.
func (p *Provider) On() bool { return p != nil && p.sdk != nil }

// Describe says where spans go, for the start-up log line ("off" when off).
func (p *Provider) Describe() string {
	if !p.On() {
		return "off"
	}
	return p.exporter
}

// Shutdown flushes the spans not yet exported, waiting until ctx ends at
// most, and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.On() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush on shutdown: %w", err)
	}
	return nil
}
