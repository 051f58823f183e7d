package state

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/talonhq/talon/internal/cluster"
)

func TestRetryableAndCode(t *testing.T) {
	tests := []struct {
		err       error
		retryable bool
		code      string
	}{
		{nil, false, "ok"},
		{ErrUnavailable, true, "unavailable"},
		{fmt.Errorf("etcd: dial: %w", ErrTimeout), true, "timeout"},
		{context.DeadlineExceeded, true, "timeout"},
		{ErrCompacted, true, "compacted"},
		{ErrConflict, true, "conflict"},
		{ErrUnauthenticated, false, "unauthenticated"},
		{fmt.Errorf("role: %w", ErrPermissionDenied), false, "permission_denied"},
		{ErrInvalidRecord, false, "invalid"},
		{ErrRecordTooLarge, false, "too_large"},
		{ErrUnsupportedVersion, false, "unsupported_version"},
		{ErrClosed, false, "closed"},
		{context.Canceled, false, "canceled"},
		{errors.New("something else"), false, "internal"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := Retryable(tt.err); got != tt.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.retryable)
			}
			if got := Code(tt.err); got != tt.code {
				t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.code)
			}
		})
	}
}

func TestRevisionIsOpaque(t *testing.T) {
	a, b := NewRevision("42"), NewRevision("42")
	if a != b || a.String() != "42" || a.IsZero() {
		t.Fatalf("revision equality or string form broken: %v %v", a, b)
	}
	if (Revision{}) != NewRevision("") || !(Revision{}).IsZero() {
		t.Fatal("zero revision")
	}
	if NewRevision("9") == NewRevision("10") {
		t.Fatal("different tokens compare equal")
	}
}

func TestSnapshotFind(t *testing.T) {
	s := &Snapshot{}
	if s.Find(keyOf("w1")) != nil {
		t.Fatal("found a record in an empty snapshot")
	}
}

func keyOf(id string) cluster.Key {
	return cluster.Key{ClusterID: "c", Role: cluster.RoleWorker, NodeID: id}
}
