// Package tracing is what a component needs of OpenTelemetry traces: Tracer
// turns the optional trace.TracerProvider a component is given into a
// tracer (a no-op one when none is given: the one fallback), and
// LogHandler puts the current span's IDs on log lines.
//
// It imports only the OpenTelemetry API. Setting up export (the SDK, the
// OTLP exporters, the OTEL_* environment) is package tracing/otlp, which
// only the wiring in internal/app imports.
//
// Invariants: LogHandler adds trace_id and span_id only to records logged
// with a context that carries a valid span.
package tracing
