package admin

import (
	"fmt"
	"net/netip"
	"sync"
)

// Event watch limits: MaxWatches long polls open on one listener, of
// which MaxWatchesPerClient from one client, so that one client cannot
// hold every slot (one held all 64) and keep other operators' UIs and
// `talonctl events -w` out.
const (
	MaxWatches          = 64
	MaxWatchesPerClient = 8
)

var (
	errTooManyWatches          = fmt.Errorf("%w: %d event watches are open on this coordinator (the most it holds); retry later", errRateLimited, MaxWatches)
	errTooManyWatchesPerClient = fmt.Errorf("%w: this client holds %d event watches, the most one client may; close one or retry later", errRateLimited, MaxWatchesPerClient)
)

// watchSlots counts the open event watches, in all and per client.
type watchSlots struct {
	mu       sync.Mutex // guards the fields below
	open     int
	byClient map[netip.Addr]int
}

func newWatchSlots() *watchSlots { return &watchSlots{byClient: map[netip.Addr]int{}} }

// acquire takes a slot for client, or says why none is free; release
// gives it back (once).
func (w *watchSlots) acquire(client netip.Addr) (release func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.byClient[client] >= MaxWatchesPerClient:
		return nil, errTooManyWatchesPerClient
	case w.open >= MaxWatches:
		return nil, errTooManyWatches
	}
	w.open++
	w.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.open--
			if w.byClient[client]--; w.byClient[client] <= 0 {
				delete(w.byClient, client)
			}
		})
	}, nil
}
