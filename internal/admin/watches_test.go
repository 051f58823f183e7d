package admin

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestWatchSlotsPerPrincipal: one token holds at most
// MaxWatchesPerPrincipal slots whatever its addresses, refused with a
// message naming the token and the limit; another token, and callers of
// a listener without tokens (anonymous), are not held by it; a released
// slot is free again.
func TestWatchSlotsPerPrincipal(t *testing.T) {
	w := newWatchSlots()
	var releases []func()
	for i := range MaxWatchesPerPrincipal {
		rel, err := w.acquire(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), "ops")
		if err != nil {
			t.Fatalf("slot %d of ops: %v", i, err)
		}
		releases = append(releases, rel)
	}
	_, err := w.acquire(netip.AddrFrom4([4]byte{10, 0, 1, 1}), "ops")
	if !errors.Is(err, errRateLimited) || !strings.Contains(err.Error(), `token "ops" holds 16 event watches, the most one token may`) {
		t.Fatalf("ops past its share: %v", err)
	}
	if _, err := w.acquire(netip.AddrFrom4([4]byte{10, 0, 1, 1}), "viewer"); err != nil {
		t.Fatalf("another token: %v", err)
	}
	for i := range MaxWatchesPerClient {
		if _, err := w.acquire(netip.AddrFrom4([4]byte{10, 0, 2, byte(i)}), anonymous); err != nil {
			t.Fatalf("anonymous watch %d: %v", i, err)
		}
	}
	releases[0]()
	releases[0]() // once
	if _, err := w.acquire(netip.AddrFrom4([4]byte{10, 0, 1, 2}), "ops"); err != nil {
		t.Fatalf("ops after a release: %v", err)
	}
	if n := len(w.byPrincipal); n != 2 {
		t.Fatalf("%d principals counted, want 2 (anonymous is none)", n)
	}
}
