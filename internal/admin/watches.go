package admin

import (
	"fmt"
	"net/netip"
	"sync"
)

// Event watch limits: MaxWatches long polls open on one listener, of
// which MaxWatchesPerClient from one client address and
// MaxWatchesPerPrincipal by one token (from any number of addresses), so
// that neither one client (one held all 64) nor one token spread over
// addresses can hold every slot and keep other operators' UIs and
// `talonctl events -w` out. A listener without tokens has one principal,
// everyone: there only the per-address limit applies.
const (
	MaxWatches             = 64
	MaxWatchesPerClient    = 8
	MaxWatchesPerPrincipal = MaxWatches / 4
)

var (
	errTooManyWatches          = fmt.Errorf("%w: %d event watches are open on this coordinator (the most it holds); retry later", errRateLimited, MaxWatches)
	errTooManyWatchesPerClient = fmt.Errorf("%w: this client holds %d event watches, the most one client may; close one or retry later", errRateLimited, MaxWatchesPerClient)
)

// tooManyWatchesOf is the refusal of a token past MaxWatchesPerPrincipal.
func tooManyWatchesOf(principal string) error {
	return fmt.Errorf("%w: token %q holds %d event watches, the most one token may from all its addresses (MaxWatchesPerPrincipal); close one or retry later", errRateLimited, principal, MaxWatchesPerPrincipal)
}

// watchSlots counts the open event watches, in all, per client and per
// principal. Its maps hold only keys with an open watch, so at most
// MaxWatches each.
type watchSlots struct {
	mu          sync.Mutex // guards the fields below
	open        int
	byClient    map[netip.Addr]int
	byPrincipal map[string]int
}

func newWatchSlots() *watchSlots {
	return &watchSlots{byClient: map[netip.Addr]int{}, byPrincipal: map[string]int{}}
}

// acquire takes a slot for client and principal (a token's name; "" or
// anonymous count against no principal), or says why none is free;
// release gives it back (once).
func (w *watchSlots) acquire(client netip.Addr, principal string) (release func(), err error) {
	if principal == anonymous {
		principal = ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.byClient[client] >= MaxWatchesPerClient:
		return nil, errTooManyWatchesPerClient
	case principal != "" && w.byPrincipal[principal] >= MaxWatchesPerPrincipal:
		return nil, tooManyWatchesOf(principal)
	case w.open >= MaxWatches:
		return nil, errTooManyWatches
	}
	w.open++
	w.byClient[client]++
	if principal != "" {
		w.byPrincipal[principal]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.open--
			if w.byClient[client]--; w.byClient[client] <= 0 {
				delete(w.byClient, client)
			}
			if principal != "" {
				if w.byPrincipal[principal]--; w.byPrincipal[principal] <= 0 {
					delete(w.byPrincipal, principal)
				}
			}
		})
	}, nil
}
