// Package cache is the gateway's in-memory cache of tool results.
//
// A result is keyed by project, tool name and the call's arguments in
// canonical form (object key order does not matter, array order does,
// 1.0 equals 1), and never by caller: one cached result serves every client
// of the project. A hit on arguments spelled exactly as before does not
// canonicalise them again: each entry remembers a few spellings (their
// hashes) that found it. The cache holds at most a configured number of
// bytes and evicts the least recently used entries past it; an entry is
// dropped once its time to live has passed.
//
// What may be cached (successful tool results of tools whose settings allow
// it; never resources or prompts) is the caller's decision; the cache only
// refuses results larger than [MaxResultBytes].
package cache

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/canonjson"
)

// MaxResultBytes is the largest result the cache keeps.
const MaxResultBytes = 256 << 10

// maxAliases is how many spellings of an entry's arguments (their exact
// bytes) find it without canonicalising them again.
const maxAliases = 4

// aliasOverhead approximates the memory of one alias: its key in the entry
// and its slot in the alias map.
const aliasOverhead = 96

// entryOverhead approximates the memory of an entry beyond its result: the
// list element, the map slot, the entry struct and its aliases, counted
// whether they are used or not.
const entryOverhead = 160 + maxAliases*aliasOverhead

// sweepEvery is how often Put walks the whole cache to drop expired
// entries that nobody asked for again.
const sweepEvery = time.Minute

// key identifies one cached result: the SHA-256 of the project, the tool
// name and the canonical arguments. An alias is the SHA-256 of the project,
// the tool name and the arguments exactly as a call spelled them (in the
// alias map only): the same bytes always have the same canonical form, so
// an alias found is the entry's key without the cost of canonicalising.
type key [sha256.Size]byte

type entry struct {
	key      key
	aliases  [maxAliases]key
	nAliases int
	project  int64
	tool     string
	result   []byte
	decoded  any // the result decoded once, shared read-only by every hit; may be nil
	expires  time.Time
	size     int64
}

// Cache is a bounded cache of tool results. Its methods are safe for
// concurrent use. The zero value is not usable; call [New].
type Cache struct {
	max int64

	mu        sync.Mutex
	items     map[key]*list.Element
	aliases   map[key]*list.Element // spellings of the arguments of items' entries
	lru       list.List             // of *entry, most recently used first
	size      int64
	lastSweep time.Time
}

// New returns a cache that holds at most maxBytes of results and keys.
// maxBytes must be positive.
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		panic("cache.New: maxBytes must be positive")
	}
	return &Cache{max: maxBytes, items: make(map[key]*list.Element), aliases: make(map[key]*list.Element), lastSweep: time.Now()}
}

// makeKey returns the key of a call; ok is false when args is not valid
// JSON. Missing or null arguments count as {}.
func makeKey(projectID int64, tool string, args json.RawMessage) (key, bool) {
	canon := []byte("{}")
	if len(args) > 0 && string(args) != "null" {
		c, err := canonjson.Canonical(args)
		if err != nil {
			return key{}, false
		}
		canon = c
	}
	return hashKey(projectID, tool, canon), true
}

// aliasOf returns the alias of a call's arguments as spelled: their bytes
// unchanged, not even checked to be JSON.
func aliasOf(projectID int64, tool string, args json.RawMessage) key {
	return hashKey(projectID, tool, args)
}

func hashKey(projectID int64, tool string, args []byte) key {
	h := sha256.New()
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], uint64(projectID))
	h.Write(id[:])
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	var k key
	h.Sum(k[:0])
	return k
}

// Get returns the cached result of a call, if there is a live one. The
// caller must not modify the returned slice.
func (c *Cache) Get(projectID int64, tool string, args json.RawMessage) (result []byte, ok bool) {
	result, _, ok = c.GetDecoded(projectID, tool, args)
	return result, ok
}

// GetDecoded is Get, also returning the decoded form given to PutDecoded
// (nil if none was), so that a hit need not decode the result again. The
// caller must not modify either.
//
// Arguments spelled exactly as a call that found or stored the entry before
// are not canonicalised again: their alias finds it.
func (c *Cache) GetDecoded(projectID int64, tool string, args json.RawMessage) (result []byte, decoded any, ok bool) {
	alias := aliasOf(projectID, tool, args)
	now := time.Now()
	c.mu.Lock()
	el := c.aliases[alias]
	if el != nil {
		defer c.mu.Unlock()
		return c.liveLocked(el, now)
	}
	c.mu.Unlock()

	k, ok := makeKey(projectID, tool, args)
	if !ok {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el = c.items[k]; el == nil {
		return nil, nil, false
	}
	if result, decoded, ok = c.liveLocked(el, now); ok {
		c.addAliasLocked(el, alias)
	}
	return result, decoded, ok
}

// liveLocked returns el's entry if it has not expired, and makes it the
// most recently used; an expired entry goes.
func (c *Cache) liveLocked(el *list.Element, now time.Time) (result []byte, decoded any, ok bool) {
	e := el.Value.(*entry)
	if !now.Before(e.expires) {
		c.removeLocked(el)
		return nil, nil, false
	}
	c.lru.MoveToFront(el)
	return e.result, e.decoded, true
}

// addAliasLocked lets alias find el, unless el has all the aliases it may
// have or alias already finds an entry.
func (c *Cache) addAliasLocked(el *list.Element, alias key) {
	e := el.Value.(*entry)
	if e.nAliases == maxAliases || c.aliases[alias] != nil {
		return
	}
	e.aliases[e.nAliases] = alias
	e.nAliases++
	c.aliases[alias] = el
}

// Sizer is a decoded result that says how many bytes it holds.
type Sizer interface{ Size() int64 }

// Put caches result for ttl. It does nothing when ttl is not positive, the
// result is larger than [MaxResultBytes] or than the whole cache, or args
// is not valid JSON. result is copied.
func (c *Cache) Put(projectID int64, tool string, args json.RawMessage, result []byte, ttl time.Duration) {
	c.PutDecoded(projectID, tool, args, result, nil, ttl)
}

// PutDecoded is Put, also keeping decoded, the result's decoded form, which
// nobody may modify afterwards: hits get it from GetDecoded. It counts
// against the cache's bytes as what its Size method says, if it has one
// ([Sizer]), else as a second copy of the result.
func (c *Cache) PutDecoded(projectID int64, tool string, args json.RawMessage, result []byte, decoded any, ttl time.Duration) {
	if ttl <= 0 || len(result) > MaxResultBytes {
		return
	}
	size := int64(len(result)) + entryOverhead
	if s, ok := decoded.(Sizer); ok {
		size += s.Size()
	} else if decoded != nil {
		size += int64(len(result))
	}
	if size > c.max {
		return
	}
	k, ok := makeKey(projectID, tool, args)
	if !ok {
		return
	}
	now := time.Now()
	e := &entry{key: k, project: projectID, tool: tool, result: append([]byte(nil), result...), decoded: decoded, expires: now.Add(ttl), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.sweepLocked(now)
	}
	if old := c.items[k]; old != nil {
		c.removeLocked(old)
	}
	el := c.lru.PushFront(e)
	c.items[k] = el
	c.addAliasLocked(el, aliasOf(projectID, tool, args))
	c.size += size
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
	}
}

// ClearProject drops every cached result of a project, as a settings save
// requires.
func (c *Cache) ClearProject(projectID int64) {
	c.clear(func(e *entry) bool { return e.project == projectID })
}

// ClearTools drops the cached results of some of a project's tools (by
// exposed name), as an agent connecting requires for its own tools.
func (c *Cache) ClearTools(projectID int64, tools ...string) {
	if len(tools) == 0 {
		return
	}
	set := make(map[string]bool, len(tools))
	for _, t := range tools {
		set[t] = true
	}
	c.clear(func(e *entry) bool { return e.project == projectID && set[e.tool] })
}

func (c *Cache) clear(drop func(*entry) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if drop(el.Value.(*entry)) {
			c.removeLocked(el)
		}
		el = next
	}
}

// Stats returns how many results the cache holds and the bytes it counts
// for them.
func (c *Cache) Stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}

func (c *Cache) sweepLocked(now time.Time) {
	c.lastSweep = now
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if !now.Before(el.Value.(*entry).expires) {
			c.removeLocked(el)
		}
		el = next
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.items, e.key)
	for _, a := range e.aliases[:e.nAliases] {
		delete(c.aliases, a)
	}
	c.size -= e.size
}
