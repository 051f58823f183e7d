package tracing

import (
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer returns tp's tracer for a Talon package, or a no-op tracer when
// tp is nil: the one place components turn an optional provider into a
// tracer.
func Tracer(tp trace.TracerProvider, pkg string) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/talonhq/talon/internal/" + pkg)
}
