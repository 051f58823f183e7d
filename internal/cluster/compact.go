package cluster

import (
	"strings"
	"sync"
)

// Interner makes records that are kept long (a store's cache of every
// record) small. A decoded record's strings are all substrings of one copy
// of its encoded value (Decode), about 1.5 KB for a worker with a dozen
// labels, of which the strings themselves are less than half, and most of
// those (the cluster ID, the version, label keys and most label values)
// are the same on every worker. Compact returns a copy whose strings are
// either shared through the interner or copied into one buffer of the
// record's own.
//
// The interner holds at most maxStrings strings of at most
// MaxInternedBytes each. When it is full it starts again empty: a string
// every worker has is taken again by the next record, so each stays shared
// by many records, while strings of one worker (host and pod names) cannot
// fill it for good. An Interner is safe for concurrent use.
type Interner struct {
	mu         sync.Mutex
	strings    map[string]string
	maxStrings int
}

// MaxInternedBytes is the longest string an Interner shares; a longer one
// is copied on its own.
const MaxInternedBytes = 256

// DefaultInternedStrings is NewInterner's size when given 0 or less:
// about 1.5 MB at most (4,096 strings of up to MaxInternedBytes).
const DefaultInternedStrings = 4096

// NewInterner returns an interner of at most maxStrings strings (0 or
// less: DefaultInternedStrings).
func NewInterner(maxStrings int) *Interner {
	if maxStrings <= 0 {
		maxStrings = DefaultInternedStrings
	}
	return &Interner{strings: make(map[string]string, maxStrings), maxStrings: maxStrings}
}

// sharedOrClone returns the interned copy of s, interning s (copied) when
// there is none yet, or a copy of its own for a string too long to share.
// in.mu must be held.
func (in *Interner) sharedOrClone(s string) string {
	if len(s) > MaxInternedBytes {
		return strings.Clone(s)
	}
	if c, ok := in.strings[s]; ok {
		return c
	}
	if len(in.strings) >= in.maxStrings {
		clear(in.strings)
	}
	c := strings.Clone(s)
	in.strings[c] = c
	return c
}

// Compact returns a copy of r that shares no memory with the value r was
// decoded from: the strings that repeat across processes are interned (or
// cloned when too long to intern), the ones that name this process (its
// IDs and addresses, superseded incarnations, its credential) are copied
// into one new buffer. r is not modified; nil gives nil.
func (in *Interner) Compact(r *Record) *Record {
	if r == nil {
		return nil
	}
	c := *r
	// The list starts in an array on the stack: a cache compacts every
	// record at start-up, and scratch lists on the heap were a third of
	// what Compact allocated (40 MB at 50,000 workers).
	var ownArr [8]*string
	// Fields that are the process's own: copied, never interned.
	own := append(ownArr[:0], &c.NodeID, &c.IncarnationID, &c.Address, &c.AdminAddress, &c.CredentialSerial)
	if len(r.Superseded) > 0 {
		c.Superseded = make([]string, len(r.Superseded))
		copy(c.Superseded, r.Superseded)
		for i := range c.Superseded {
			own = append(own, &c.Superseded[i])
		}
	}

	// Fields that repeat across processes, and labels: interned (a
	// string too long to intern is cloned on its own).
	in.mu.Lock()
	c.ClusterID, c.Version = in.sharedOrClone(c.ClusterID), in.sharedOrClone(c.Version)
	c.Role, c.Health = Role(in.sharedOrClone(string(c.Role))), Health(in.sharedOrClone(string(c.Health)))
	c.NotReadyReason, c.PlacementVersion = in.sharedOrClone(c.NotReadyReason), in.sharedOrClone(c.PlacementVersion)
	c.CordonedBy, c.RevokedBy, c.RevokedReason = in.sharedOrClone(c.CordonedBy), in.sharedOrClone(c.RevokedBy), in.sharedOrClone(c.RevokedReason)
	if r.Labels != nil {
		c.Labels = make(map[string]string, len(r.Labels))
		for k, v := range r.Labels {
			c.Labels[in.sharedOrClone(k)] = in.sharedOrClone(v)
		}
	}
	in.mu.Unlock()

	n := 0
	for _, p := range own {
		n += len(*p)
	}
	if n > 0 {
		var b strings.Builder
		b.Grow(n)
		for _, p := range own {
			b.WriteString(*p)
		}
		buf, off := b.String(), 0
		for _, p := range own {
			l := len(*p)
			*p = buf[off : off+l]
			off += l
		}
	}
	return &c
}
