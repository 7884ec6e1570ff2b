package protocol

import "sync"

// memo is a bounded map for answers that never go stale (a parsed key, a
// fact about an account that cannot change), or for guesses that are
// checked before they count (Server.lastKeys, ahead.go). When full it
// forgets everything at once: losing it costs recomputing an answer, never
// a wrong one. The zero value holds up to memoMax entries.
type memo[V any] struct {
	max int // 0: memoMax
	mu  sync.Mutex
	m   map[string]V
}

const memoMax = 10_000

func (c *memo[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memo[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.max
	if limit <= 0 {
		limit = memoMax
	}
	if c.m == nil || len(c.m) >= limit {
		c.m = make(map[string]V)
	}
	c.m[k] = v
}
