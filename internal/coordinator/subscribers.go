package coordinator

import (
	"sync"

	"github.com/talonhq/talon/internal/placement"
)

// subscribers is the set of connections that asked for placement-version
// pushes, and the version last published to them. It has its own lock,
// taken while holding a conn's wmu (the Subscribe reply), never the other
// way round.
type subscribers struct {
	mu        sync.Mutex // guards the fields below
	set       map[*conn]struct{}
	published placement.Version
	have      bool // a version was published
}

func newSubscribers() *subscribers { return &subscribers{set: map[*conn]struct{}{}} }

// add subscribes cn and returns whether it is cn's first subscription and
// the version published last (the Subscribe reply).
func (s *subscribers) add(cn *conn) (first bool, version placement.Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, again := s.set[cn]
	s.set[cn] = struct{}{}
	return !again, s.published
}

// remove unsubscribes cn.
func (s *subscribers) remove(cn *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, cn)
}

// publish makes v the current version and, when it changed, offers it to
// every subscriber (each has a one-slot mailbox, so this never blocks).
// It returns whether v changed and the version before.
func (s *subscribers) publish(v placement.Version) (changed bool, old placement.Version, hadOld bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.have && s.published == v {
		return false, v, true
	}
	old, hadOld = s.published, s.have
	s.published, s.have = v, true
	for cn := range s.set {
		cn.offer(uint64(v))
	}
	return true, old, hadOld
}
