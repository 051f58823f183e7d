package testsupport

import (
	"sync"
	"time"
)

// FakeClock is a manual clock: it stands still until a test sets or
// advances it. Pass its Now method wherever a func() time.Time is wanted.
type FakeClock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// NewFakeClock returns a clock reading start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{t: start} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t, backwards or forwards.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
