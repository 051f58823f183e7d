package cache

// This file is the S3-FIFO bookkeeping (see doc.go): two FIFO queues of
// entries weighted by bytes and a ghost FIFO of IDs. It does no I/O; the
// Cache calls it with its mutex held.

// blockID identifies a block.
type blockID struct {
	object string
	index  int64
}

// maxFreq caps an entry's access counter (2 bits in the paper).
const maxFreq = 3

// queue is an intrusive doubly linked FIFO: push at the head, pop at the tail.
type queue struct {
	head, tail *entry
	bytes      int64
	len        int
}

func (q *queue) pushHead(e *entry) {
	e.q = q
	e.prev, e.next = nil, q.head
	if q.head != nil {
		q.head.prev = e
	} else {
		q.tail = e
	}
	q.head = e
	q.bytes += e.fileSize
	q.len++
}

func (q *queue) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		q.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		q.tail = e.prev
	}
	e.prev, e.next, e.q = nil, nil, nil
	q.bytes -= e.fileSize
	q.len--
}

// ghost is a bounded FIFO set of block IDs recently evicted from the
// small queue.
type ghost struct {
	limit int
	seq   uint64
	set   map[blockID]uint64 // ID -> seq of its newest insertion
	fifo  []ghostItem        // oldest first, from fifo[head]
	head  int
}

type ghostItem struct {
	id  blockID
	seq uint64
}

func newGhost(limit int) *ghost {
	return &ghost{limit: max(limit, 1), set: make(map[blockID]uint64)}
}

func (g *ghost) add(id blockID) {
	g.seq++
	g.set[id] = g.seq
	g.fifo = append(g.fifo, ghostItem{id, g.seq})
	for len(g.set) > g.limit || len(g.fifo)-g.head > 2*g.limit {
		it := g.fifo[g.head]
		g.fifo[g.head] = ghostItem{}
		g.head++
		if g.set[it.id] == it.seq {
			delete(g.set, it.id)
		}
	}
	if g.head > len(g.fifo)/2 {
		g.fifo = append(g.fifo[:0], g.fifo[g.head:]...)
		g.head = 0
	}
}

// take reports whether id is in the ghost set and removes it.
func (g *ghost) take(id blockID) bool {
	if _, ok := g.set[id]; ok {
		delete(g.set, id)
		return true
	}
	return false
}

// policy is the S3-FIFO state of a cache.
type policy struct {
	small, main queue
	ghost       *ghost
	smallTarget int64 // bytes the small queue may hold before it is evicted from first
}

func newPolicy(capacity, blockSize int64) *policy {
	return &policy{
		ghost:       newGhost(int(min(capacity/blockSize, 1<<20))),
		smallTarget: capacity / 10,
	}
}

// insert places a new entry: in main when the ghost remembers it, else in small.
func (p *policy) insert(e *entry) {
	e.freq = 0
	if p.ghost.take(e.id) {
		p.main.pushHead(e)
		return
	}
	p.small.pushHead(e)
}

// touch records a read of a resident entry.
func (p *policy) touch(e *entry) {
	if e.freq < maxFreq {
		e.freq++
	}
}

// victim unlinks and returns the next entry to evict, or nil when both
// queues are empty. Entries passed over are moved as S3-FIFO says.
func (p *policy) victim() *entry {
	for p.small.len+p.main.len > 0 {
		if p.main.len == 0 || (p.small.len > 0 && p.small.bytes > p.smallTarget) {
			e := p.small.tail
			p.small.remove(e)
			if e.freq > 1 {
				p.main.pushHead(e)
				continue
			}
			p.ghost.add(e.id)
			return e
		}
		e := p.main.tail
		p.main.remove(e)
		if e.freq > 0 {
			e.freq--
			p.main.pushHead(e)
			continue
		}
		return e
	}
	return nil
}

// drop unlinks e from its queue (e is leaving for another reason than eviction).
func (p *policy) drop(e *entry) {
	if e.q != nil {
		e.q.remove(e)
	}
}
