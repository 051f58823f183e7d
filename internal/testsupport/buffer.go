package testsupport

import (
	"bytes"
	"sync"
)

// SyncBuffer is an io.Writer that several goroutines may write while a
// test reads it: a program's output, a process's log. The zero value is
// empty and ready to use.
type SyncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
