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

// MaxInternedBytes is the longest string an Interner shares; longer ones
// are copied into the record's own buffer.
const MaxInternedBytes = 256

// DefaultInternedStrings is NewInterner's size when given 0 or less: a
// few hundred KB at most.
const DefaultInternedStrings = 4096

// NewInterner returns an interner of at most maxStrings strings (0 or
// less: DefaultInternedStrings).
func NewInterner(maxStrings int) *Interner {
	if maxStrings <= 0 {
		maxStrings = DefaultInternedStrings
	}
	return &Interner{strings: make(map[string]string, maxStrings), maxStrings: maxStrings}
}

// shared returns the interned copy of s, interning s (copied) when there is
// none yet; ok is false for a string too long to share.
func (in *Interner) shared(s string) (string, bool) {
	if len(s) > MaxInternedBytes {
		return "", false
	}
	if c, ok := in.strings[s]; ok {
		return c, true
	}
	if len(in.strings) >= in.maxStrings {
		clear(in.strings)
	}
	c := strings.Clone(s)
	in.strings[c] = c
	return c, true
}

// Compact returns a copy of r that shares no memory with the value r was
// decoded from: the strings that repeat across processes are interned, the
// ones that name this process (its IDs and addresses, superseded
// incarnations, its credential) are copied into one new buffer with the
// strings too long to intern. r is not modified; nil gives nil.
func (in *Interner) Compact(r *Record) *Record {
	if r == nil {
		return nil
	}
	c := *r
	// Fields that are the process's own: copied, never interned.
	own := []*string{&c.NodeID, &c.IncarnationID, &c.Address, &c.AdminAddress, &c.CredentialSerial}
	if len(r.Superseded) > 0 {
		c.Superseded = make([]string, len(r.Superseded))
		copy(c.Superseded, r.Superseded)
		for i := range c.Superseded {
			own = append(own, &c.Superseded[i])
		}
	}
	// Fields that repeat across processes: interned.
	common := []*string{&c.ClusterID, (*string)(&c.Role), &c.Version, (*string)(&c.Health), &c.NotReadyReason,
		&c.CordonedBy, &c.RevokedBy, &c.RevokedReason, &c.PlacementVersion}
	var keys, values []string
	if r.Labels != nil {
		keys, values = make([]string, 0, len(r.Labels)), make([]string, 0, len(r.Labels))
		for k, v := range r.Labels {
			keys, values = append(keys, k), append(values, v)
		}
		for i := range keys {
			common = append(common, &keys[i], &values[i])
		}
	}

	in.mu.Lock()
	for _, p := range common {
		if s, ok := in.shared(*p); ok {
			*p = s
		} else {
			own = append(own, p)
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
	if r.Labels != nil {
		c.Labels = make(map[string]string, len(keys))
		for i, k := range keys {
			c.Labels[k] = values[i]
		}
	}
	return &c
}
