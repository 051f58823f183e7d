package blob

import (
	"context"
	"errors"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Traced wraps s so that every fetch from the store is a span: blob.size,
// blob.stat and blob.read, the last ending when its reader is closed, with
// the bytes read. A nil tp returns s unchanged.
func Traced(s Store, tp trace.TracerProvider) Store {
	if tp == nil {
		return s
	}
	return &traced{s: s, tracer: tp.Tracer("github.com/talonhq/talon/internal/blob")}
}

type traced struct {
	s      Store
	tracer trace.Tracer
}

func (t *traced) start(ctx context.Context, name, object string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, attribute.String("talon.blob.object", object))
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, io.EOF) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (t *traced) Size(ctx context.Context, object string) (int64, error) {
	ctx, span := t.start(ctx, "blob.size", object)
	n, err := t.s.Size(ctx, object)
	span.SetAttributes(attribute.Int64("talon.blob.size", n))
	endSpan(span, err)
	return n, err
}

func (t *traced) Stat(ctx context.Context, object string) (Info, error) {
	ctx, span := t.start(ctx, "blob.stat", object)
	info, err := Stat(ctx, t.s, object)
	span.SetAttributes(attribute.Int64("talon.blob.size", info.Size), attribute.String("talon.blob.version", info.Version))
	endSpan(span, err)
	return info, err
}

func (t *traced) ReadRange(ctx context.Context, object string, off, length int64) (io.ReadCloser, error) {
	return t.ReadVersion(ctx, object, "", off, length)
}

func (t *traced) ReadVersion(ctx context.Context, object, version string, off, length int64) (io.ReadCloser, error) {
	ctx, span := t.start(ctx, "blob.read", object, attribute.String("talon.blob.version", version),
		attribute.Int64("talon.blob.offset", off), attribute.Int64("talon.blob.length", length))
	rc, err := ReadVersion(ctx, t.s, object, version, off, length)
	if err != nil {
		endSpan(span, err)
		return nil, err
	}
	return &tracedReader{rc: rc, span: span}, nil
}

// tracedReader ends its read's span on Close, with the bytes read and the
// first read error.
type tracedReader struct {
	rc   io.ReadCloser
	span trace.Span
	n    int64
	err  error
}

func (r *tracedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.n += int64(n)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *tracedReader) Close() error {
	err := r.rc.Close()
	if r.span != nil {
		r.span.SetAttributes(attribute.Int64("talon.blob.bytes", r.n))
		rerr := r.err
		if errors.Is(rerr, io.EOF) {
			rerr = nil
		}
		endSpan(r.span, errors.Join(rerr, err))
		r.span = nil
	}
	return err
}

// List implements Lister when the traced store does.
func (t *traced) List(ctx context.Context, prefix string, max int) ([]string, bool, error) {
	ctx, span := t.start(ctx, "blob.list", prefix)
	keys, more, err := List(ctx, t.s, prefix, max)
	span.SetAttributes(attribute.Int("talon.blob.keys", len(keys)))
	endSpan(span, err)
	return keys, more, err
}
