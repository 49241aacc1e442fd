package schema

import (
	"encoding/json"
	"runtime"
	"sync"
	"weak"
)

// Cache compiles each distinct schema text once for as long as anyone
// holds the result: 10,000 replicas of one agent register the same input
// schemas, and a compiled schema is immutable, so they can share one. An
// entry goes when its schema is no longer referenced. The zero value is
// ready to use; a Cache is safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	entries map[cacheKey]weak.Pointer[Schema]
}

type cacheKey struct {
	raw  string
	opts Options
}

// Compile returns the compiled schema of raw read with opts: the one
// compiled before if it is still in use, else a new one ([CompileWith]).
// Schemas that do not compile are not kept.
func (c *Cache) Compile(raw json.RawMessage, opts Options) (*Schema, error) {
	k := cacheKey{string(raw), opts}
	c.mu.Lock()
	wp, ok := c.entries[k]
	c.mu.Unlock()
	if ok {
		if s := wp.Value(); s != nil {
			return s, nil
		}
	}
	s, err := CompileWith(raw, opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Another caller may have compiled the same text meanwhile.
	if s2 := c.entries[k].Value(); s2 != nil {
		return s2, nil
	}
	if c.entries == nil {
		c.entries = make(map[cacheKey]weak.Pointer[Schema])
	}
	wp = weak.Make(s)
	c.entries[k] = wp
	runtime.AddCleanup(s, c.forget, cacheEntry{k, wp})
	return s, nil
}

type cacheEntry struct {
	key cacheKey
	wp  weak.Pointer[Schema]
}

// forget removes e once its schema is collected, unless the text has been
// compiled again since.
func (c *Cache) forget(e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] == e.wp {
		delete(c.entries, e.key)
	}
}

// Len returns how many schemas the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
