package cache

import (
	"os"
	"sync"
)

// Usage returns the resident and reserved bytes, for tests that check the
// capacity invariant.
func (c *Cache) Usage() (resident, reserved int64) {
	_, resident, reserved = c.idx.usage()
	return resident, reserved
}

// BlockPath returns the file a block would live in, for tests that damage it.
func (c *Cache) BlockPath(object string, index int64) string {
	shard, name := blockName(object, index)
	return c.root + "/" + shard + "/" + name
}

// HeaderLen is the header length of a block of object.
func HeaderLen(object string) int64 { return headerLen(object, "") }

// FailCreate makes the next n temporary-file creations fail with err.
func (c *Cache) FailCreate(n int, err error) {
	var mu sync.Mutex // guards left
	left := n
	c.createTemp = func(dir, pattern string) (*os.File, error) {
		mu.Lock()
		fail := left > 0
		if fail {
			left--
		}
		mu.Unlock()
		if fail {
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return os.CreateTemp(dir, pattern)
	}
}

// SetLoadBuffer sets the size of the buffer loads write block files
// through, before the first load.
func (c *Cache) SetLoadBuffer(n int) { c.loadBuf = n }
