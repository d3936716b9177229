package persist

// lru is the hot tier: a map plus an intrusive doubly linked list in
// recency order (front = most recent). It is not safe for concurrent use;
// the Store guards it with Store.mu.
//
// Entries hold encoded records, which are never mutated after Push encodes
// them, so a reader may keep a reference after the lock is released.
type lru struct {
	m     map[string]*centry
	head  centry // sentinel: head.next is the most recent, head.prev the least
	bytes int64  // sum of entry sizes
	max   int64  // high-water mark of bytes, for tests and metrics
}

type centry struct {
	key        string
	enc        []byte // encoded record
	voff       int    // value offset in enc
	dirty      bool   // not yet in Pebble
	evicting   bool   // chosen as a victim, being written to Pebble
	prev, next *centry
}

// entryOverhead approximates the memory one entry costs beyond its key and
// record: the centry, the map slot and the string header.
const entryOverhead = 112

func (e *centry) size() int64 { return int64(len(e.key) + len(e.enc) + entryOverhead) }

// init empties c in place; the sentinel points at itself, so an lru must
// not be copied after init.
func (c *lru) init() {
	*c = lru{m: map[string]*centry{}}
	c.head.next, c.head.prev = &c.head, &c.head
}

func (c *lru) unlink(e *centry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *lru) pushFront(e *centry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// get returns the entry for key and marks it most recently used.
func (c *lru) get(key string) *centry {
	e := c.m[key]
	if e != nil && c.head.next != e {
		c.unlink(e)
		c.pushFront(e)
	}
	return e
}

// put inserts or replaces key as the most recent entry.
func (c *lru) put(e *centry) {
	if old := c.m[e.key]; old != nil {
		c.remove(old)
	}
	c.m[e.key] = e
	c.pushFront(e)
	c.bytes += e.size()
	if c.bytes > c.max {
		c.max = c.bytes
	}
}

func (c *lru) remove(e *centry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.bytes -= e.size()
}

// victims appends least recently used entries not already being evicted to
// dst, until removing them would bring bytes to at most target, marks them
// evicting, and returns dst.
func (c *lru) victims(dst []*centry, target int64) []*centry {
	b := c.bytes
	for _, v := range dst {
		b -= v.size()
	}
	for e := c.head.prev; e != &c.head && b > target; e = e.prev {
		if e.evicting {
			continue
		}
		e.evicting = true
		dst = append(dst, e)
		b -= e.size()
	}
	return dst
}
