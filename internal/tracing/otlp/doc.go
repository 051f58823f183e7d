// Package otlp sets up OpenTelemetry traces for a Talon process from the
// standard OTEL_* environment: the OTLP exporters (gRPC and HTTP) and the
// SDK. Only the wiring (internal/app) imports it, so that the exporters
// and gRPC stay out of every other package (deptest holds it); components
// take a trace.TracerProvider and turn it into a tracer with
// tracing.Tracer.
//
// Tracing is off unless the environment asks for it: OTEL_TRACES_EXPORTER=otlp,
// or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with OTEL_TRACES_EXPORTER unset.
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. When it
// is on, spans go to one OTLP exporter over OTEL_EXPORTER_OTLP_PROTOCOL
// (http/protobuf, the default, or grpc); the exporters read the endpoint,
// headers, TLS files, compression and timeout from their standard variables,
// the SDK reads the sampler (OTEL_TRACES_SAMPLER, _ARG) and batch settings
// (OTEL_BSP_*), and OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add to
// the resource. When it is off, every tracer is a no-op and costs nothing
// but the calls.
//
// Credentials: the endpoint's userinfo password is shown only redacted
// (redact.URL), in Describe and so in the start-up line. The OTLP/HTTP
// exporter follows a redirect only within the endpoint's origin (scheme,
// host and port): net/http resends every header of the first request
// across a redirect (OTEL_EXPORTER_OTLP_HEADERS, Authorization to any port
// of the same host), so a redirect elsewhere fails the export instead.
// Because that takes giving the exporter its HTTP client, the exporter's
// TLS files (OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE, _CLIENT_CERTIFICATE,
// _CLIENT_KEY), its timeout and the proxy variables are read here, with
// the exporter's names and precedence.
//
// Invariants: New does no network I/O; a nil or off Provider hands out
// no-op tracers, so components take an optional trace.TracerProvider and
// never check whether tracing is on.
//
// Concurrency: a Provider is safe for concurrent use; Shutdown once, last.
package otlp
