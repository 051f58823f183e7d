package apiv1

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Server memory defaults.
const (
	// ProbeAttemptTimeout bounds the attempt of a base URL that an earlier
	// run remembered as silent (ServerMemory.Seed): long enough for a
	// healthy admin listener's headers, short enough that asking a server
	// that is still hung costs little.
	ProbeAttemptTimeout = 500 * time.Millisecond
	// SilentHold is how long a base URL that gave no answer is skipped by
	// the clients sharing a ServerMemory (the length of a command that
	// asks several endpoints); after it, it is probed with
	// ProbeAttemptTimeout, so that a long-running command (a watch, top,
	// drain) sees a coordinator come back within seconds and pays little
	// while it stays silent.
	SilentHold = 5 * time.Second
)

// ServerMemory is what the clients of one run (one talonctl invocation)
// share about their base URLs: the one that last answered, which every
// failover client tries first, and those that gave no answer (could not
// connect, or no response headers within the attempt deadline). A base
// URL silent in this run is not asked again for SilentHold: a failover
// client tries the others and a client with no other returns the
// remembered error at once, so a run pays a hung server's attempt
// deadline once however many requests or endpoints it has; after that it
// is probed. A base URL an earlier run found silent (Seed) is tried last
// and probed: asked with ProbeAttemptTimeout, so that a server still hung
// costs little and one that answers again is back at once (one slower
// than that to send its headers stays unreached while it is remembered). A ServerMemory is safe for concurrent use; its
// zero value is not usable, use NewServerMemory.
type ServerMemory struct {
	now func() time.Time

	mu       sync.Mutex // guards the fields below
	answered string     // base URL that last answered; "" when none
	silent   map[string]silence
}

// silence is a base URL's latest failure to answer.
type silence struct {
	at      time.Time
	err     error // nil for one remembered from an earlier run
	earlier bool  // Seed: from an earlier run, so probed rather than skipped
}

// NewServerMemory returns an empty memory; now is its clock (time.Now when
// nil).
func NewServerMemory(now func() time.Time) *ServerMemory {
	if now == nil {
		now = time.Now
	}
	return &ServerMemory{now: now, silent: map[string]silence{}}
}

// Seed records what an earlier run learned: the base URL that answered
// last ("" for none) and those that gave no answer, with when. Base URLs
// are normalized as the clients normalize theirs; one that does not parse
// is ignored.
func (m *ServerMemory) Seed(answered string, silent map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, err := normalizeBase(answered, false); answered != "" && err == nil {
		m.answered = b
	}
	for raw, at := range silent {
		if b, err := normalizeBase(raw, false); err == nil && b != m.answered {
			m.silent[b] = silence{at: at, earlier: true}
		}
	}
}

// Snapshot returns what the memory knows, for a later run's Seed: the base
// URL that answered last and the silent ones with when they failed.
func (m *ServerMemory) Snapshot() (answered string, silent map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	silent = make(map[string]time.Time, len(m.silent))
	for b, s := range m.silent {
		silent[b] = s.at
	}
	return m.answered, silent
}

// noteAnswer records that base answered.
func (m *ServerMemory) noteAnswer(base string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answered = base
	delete(m.silent, base)
}

// noteSilent records that base gave no answer.
func (m *ServerMemory) noteSilent(base string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.silent[base] = silence{at: m.now(), err: err}
	if m.answered == base {
		m.answered = ""
	}
}

// skip returns the error base gave earlier in this run when it is still
// held as silent; nil when base is to be tried.
func (m *ServerMemory) skip(base string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.silent[base]
	if !ok || s.earlier || m.now().Sub(s.at) >= SilentHold {
		return nil
	}
	return fmt.Errorf("%s: not asked again: it gave no answer %s ago in this run: %w", base, m.now().Sub(s.at).Round(time.Millisecond), s.err)
}

// probing reports whether base gave no answer (in an earlier run, or in
// this one longer than SilentHold ago) and has not answered since, so that
// its attempt is short.
func (m *ServerMemory) probing(base string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.silent[base]
	return ok && (s.earlier || m.now().Sub(s.at) >= SilentHold)
}

// order returns the indexes of bases in the order to try them: from first
// (the client's own preference) on, with the base that last answered for
// any client of the memory first, and those remembered as silent last.
func (m *ServerMemory) order(bases []string, first int) []int {
	n := len(bases)
	idx := make([]int, 0, n)
	for i := range n {
		idx = append(idx, (first+i)%n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rank := func(i int) int {
		switch _, silent := m.silent[bases[i]]; {
		case bases[i] == m.answered:
			return 0
		case silent:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(idx, func(a, b int) int { return rank(a) - rank(b) })
	return idx
}
