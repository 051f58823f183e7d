package blob_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/talonhq/talon/internal/blob"
)

// TestTracedStore: a read's span ends at Close with the bytes read; a
// failed fetch's span carries the error; a nil provider adds nothing.
func TestTracedStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "obj"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := blob.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if blob.Traced(fs, nil) != blob.Store(fs) {
		t.Fatal("Traced with no provider wrapped the store")
	}
	rec := tracetest.NewSpanRecorder()
	s := blob.Traced(fs, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	info, err := blob.Stat(context.Background(), s, "obj")
	if err != nil || info.Size != 1000 {
		t.Fatalf("stat: %+v %v", info, err)
	}
	rc, err := blob.ReadVersion(context.Background(), s, "obj", info.Version, 100, 400)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, rc); n != 400 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if len(rec.Ended()) != 1 {
		t.Fatalf("%d spans ended before Close, want only blob.stat", len(rec.Ended()))
	}
	rc.Close()
	if _, err := blob.Stat(context.Background(), s, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("stat of a missing object: %v", err)
	}
	spans := rec.Ended()
	if len(spans) != 3 || spans[0].Name() != "blob.stat" || spans[1].Name() != "blob.read" || spans[2].Name() != "blob.stat" {
		t.Fatalf("spans %v", spans)
	}
	if got := attr(spans[1].Attributes(), "talon.blob.bytes"); got.AsInt64() != 400 || spans[1].Status().Code == codes.Error {
		t.Errorf("blob.read bytes %v status %v, want 400 and no error", got.AsInt64(), spans[1].Status())
	}
	if spans[2].Status().Code != codes.Error {
		t.Errorf("failed stat's span status %v, want an error", spans[2].Status())
	}
}

func attr(kvs []attribute.KeyValue, key string) attribute.Value {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
