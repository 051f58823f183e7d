package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/talonhq/talon/internal/cluster"
)

// CordonReason is the not-ready reason of a cordoned worker, in its
// readiness and in its record.
const CordonReason = cluster.NotReadyCordoned

// ErrCannotPersist is SetCordon's error for a persisted cordon on a worker
// without a cordon file.
var ErrCannotPersist = errors.New("this worker has no cache directory to keep a persisted cordon in")

// cordonFileContent marks a persisted cordon; the file's presence is what
// counts.
const cordonFileContent = "cordoned by an operator (talonctl nodes cordon --persist); talonctl nodes uncordon removes this file\n"

// cordon is an operator's request to take the worker out of service: the
// worker stays up and serves the requests routed to it, but reports itself
// not ready (reason cordoned), so placement leaves it out. It has its own
// lock (not Worker.mu), so the admin listener never waits for a heartbeat;
// cordon.mu is a leaf: it may be taken with Worker.mu held, never the
// other way round.
type cordon struct {
	file string // where a persisted cordon is kept; "" when persisting is off

	mu        sync.Mutex // guards the fields below
	on        bool
	persisted bool
	by        string // the operator's principal, as the coordinators said; "" when unknown
	atUnixMs  int64
}

// loadCordon returns the cordon state, cordoned when file exists.
func loadCordon(file string) (*cordon, error) {
	c := &cordon{file: file}
	if file == "" {
		return c, nil
	}
	switch _, err := os.Stat(file); {
	case err == nil:
		c.on, c.persisted = true, true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cordon file %s: %w", file, err)
	}
	return c, nil
}

func (c *cordon) state() (on, persisted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on, c.persisted
}

// who returns the operator and time of the cordon, when known.
func (c *cordon) who() (by string, atUnixMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by, c.atUnixMs
}

// noteWho records the operator and time the coordinators report.
func (c *cordon) noteWho(by string, atUnixMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by, c.atUnixMs = by, atUnixMs
}

// set cordons or uncordons. A persisted cordon writes the file before it
// reports success; an uncordon removes it.
func (c *cordon) set(on, persist bool) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if persist && c.file == "" {
		return false, ErrCannotPersist
	}
	if on && persist && !c.persisted {
		if err := writeFileSync(c.file, []byte(cordonFileContent)); err != nil {
			return false, fmt.Errorf("persist cordon: %w", err)
		}
	}
	if !on && c.persisted {
		if err := os.Remove(c.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove persisted cordon: %w", err)
		}
	}
	changed = c.on != on || (on && persist && !c.persisted)
	c.on = on
	c.persisted = on && (persist || c.persisted)
	return changed, nil
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Cordoned reports whether the worker is cordoned and whether that cordon
// is persisted.
func (w *Worker) Cordoned() (cordoned, persisted bool) { return w.cordon.state() }

// inflight counts the data requests being served: a drain waits for them.
type inflight struct {
	n atomic.Int64
	h http.Handler
}

func (i *inflight) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	i.n.Add(1)
	defer i.n.Add(-1)
	i.h.ServeHTTP(rw, r)
}

// InflightRequests returns how many data requests the worker is serving.
func (w *Worker) InflightRequests() int64 { return w.inflight.n.Load() }

// recordReadinessLocked is the readiness a record reports, and why not:
// draining, cordoned, a failing cache directory (registration is the
// record's own business). Called with w.mu held.
func (w *Worker) recordReadinessLocked() (bool, string) {
	switch on, _ := w.cordon.state(); {
	case w.draining:
		return false, "draining: shutting down"
	case on:
		return false, CordonReason
	case w.diskStreak >= DiskErrorStreak:
		return false, "cache directory failing"
	}
	return true, ""
}
