package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestCanonicalKey(t *testing.T) {
	for _, tt := range []struct {
		name      string
		put, get  string
		wantShare bool
	}{
		{"object key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{"nested key order", `{"q":{"x":1,"y":[{"m":1,"n":2}]}}`, `{"q":{"y":[{"n":2,"m":1}],"x":1}}`, true},
		{"white space", `{"a":1}`, " {\n \"a\" : 1 } ", true},
		{"number forms", `{"limit":10}`, `{"limit":10.0}`, true},
		{"string escapes", `{"s":"A"}`, `{"s":"\u0041"}`, true},
		{"missing is empty", ``, `{}`, true},
		{"null is empty", `null`, `{}`, true},
		{"array order", `[1,2]`, `[2,1]`, false},
		{"array order inside", `{"ids":[1,2]}`, `{"ids":[2,1]}`, false},
		{"different value", `{"a":1}`, `{"a":2}`, false},
		{"number vs string", `{"a":1}`, `{"a":"1"}`, false},
		{"extra member", `{"a":1}`, `{"a":1,"b":null}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := New(1 << 20)
			c.Put(1, "search", raw(tt.put), []byte("result"), time.Minute)
			got, ok := c.Get(1, "search", raw(tt.get))
			if ok != tt.wantShare {
				t.Fatalf("Put(%s) then Get(%s): hit = %v, want %v", tt.put, tt.get, ok, tt.wantShare)
			}
			if ok && string(got) != "result" {
				t.Errorf("Get = %q, want %q", got, "result")
			}
		})
	}
}

func TestKeyScope(t *testing.T) {
	c := New(1 << 20)
	c.Put(1, "search", raw(`{}`), []byte("p1 search"), time.Minute)
	for _, tt := range []struct {
		project int64
		tool    string
	}{{2, "search"}, {1, "search2"}, {1, "searc"}} {
		if got, ok := c.Get(tt.project, tt.tool, raw(`{}`)); ok {
			t.Errorf("Get(%d, %q) = %q, want a miss: keys are per project and tool", tt.project, tt.tool, got)
		}
	}
	// A tool name cannot run into the arguments.
	c.Put(1, "a", raw(`"b"`), []byte("x"), time.Minute)
	if _, ok := c.Get(1, "a\"", raw(`b"`)); ok {
		t.Error("tool and arguments collide")
	}
}

func TestPutRefuses(t *testing.T) {
	c := New(1 << 20)
	c.Put(1, "big", raw(`{}`), bytes.Repeat([]byte("x"), MaxResultBytes+1), time.Minute)
	c.Put(1, "zero", raw(`{}`), []byte("x"), 0)
	c.Put(1, "bad", raw(`{"a":`), []byte("x"), time.Minute)
	if n, _ := c.Stats(); n != 0 {
		t.Errorf("cache holds %d entries after refused puts, want 0", n)
	}
	c.Put(1, "max", raw(`{}`), bytes.Repeat([]byte("x"), MaxResultBytes), time.Minute)
	if _, ok := c.Get(1, "max", raw(`{}`)); !ok {
		t.Error("a result of exactly MaxResultBytes was not cached")
	}
	if _, ok := c.Get(1, "bad", raw(`{"a":`)); ok {
		t.Error("Get with invalid JSON hit")
	}
}

func TestPutCopiesResult(t *testing.T) {
	c := New(1 << 20)
	buf := []byte("first")
	c.Put(1, "t", nil, buf, time.Minute)
	copy(buf, "XXXXX")
	if got, _ := c.Get(1, "t", nil); string(got) != "first" {
		t.Errorf("Get = %q after the caller reused its buffer, want %q", got, "first")
	}
}

func TestSizeCapEvictsLeastRecentlyUsed(t *testing.T) {
	const resultSize = 1000
	per := int64(resultSize + entryOverhead)
	c := New(3 * per)
	result := bytes.Repeat([]byte("r"), resultSize)
	put := func(name string) { c.Put(1, name, nil, result, time.Minute) }
	put("a")
	put("b")
	put("c")
	c.Get(1, "a", nil) // a is now the most recent; b the least
	put("d")
	for name, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.Get(1, name, nil); ok != want {
			t.Errorf("after overflow, %s cached = %v, want %v", name, ok, want)
		}
	}
	if n, size := c.Stats(); n != 3 || size > 3*per {
		t.Errorf("Stats = %d entries, %d bytes; want 3 entries within %d bytes", n, size, 3*per)
	}
	// Replacing an entry does not count it twice.
	put("a")
	if _, size := c.Stats(); size != 3*per {
		t.Errorf("size after replacing an entry = %d, want %d", size, 3*per)
	}
	// A result larger than the whole cache is refused, not allowed to
	// empty it.
	c.Put(1, "huge", nil, bytes.Repeat([]byte("r"), int(3*per)), time.Minute)
	if n, _ := c.Stats(); n != 3 {
		t.Errorf("a result larger than the cache changed it to %d entries, want 3", n)
	}
}

func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		c.Put(1, "t", raw(`{"a":1}`), []byte("v"), 30*time.Second)
		time.Sleep(29 * time.Second)
		if _, ok := c.Get(1, "t", raw(`{"a":1}`)); !ok {
			t.Fatal("miss 29s into a 30s window")
		}
		time.Sleep(time.Second)
		if _, ok := c.Get(1, "t", raw(`{"a":1}`)); ok {
			t.Fatal("hit 30s into a 30s window")
		}
		if n, size := c.Stats(); n != 0 || size != 0 {
			t.Errorf("Stats after an expired Get = %d, %d; want it dropped", n, size)
		}
	})
}

func TestSweepDropsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		for i := range 10 {
			c.Put(1, fmt.Sprint("t", i), nil, []byte("v"), 5*time.Second)
		}
		time.Sleep(sweepEvery)
		c.Put(1, "fresh", nil, []byte("v"), time.Hour)
		if n, _ := c.Stats(); n != 1 {
			t.Errorf("cache holds %d entries after a sweep, want only the fresh one", n)
		}
	})
}

func TestClearProject(t *testing.T) {
	c := New(1 << 20)
	for _, p := range []int64{1, 2} {
		for i := range 5 {
			c.Put(p, fmt.Sprint("t", i), nil, []byte("v"), time.Minute)
		}
	}
	c.ClearProject(1)
	for i := range 5 {
		if _, ok := c.Get(1, fmt.Sprint("t", i), nil); ok {
			t.Errorf("project 1 tool t%d still cached after ClearProject", i)
		}
		if _, ok := c.Get(2, fmt.Sprint("t", i), nil); !ok {
			t.Errorf("project 2 tool t%d dropped by ClearProject(1)", i)
		}
	}
	if n, size := c.Stats(); n != 5 || size != 5*(1+entryOverhead) {
		t.Errorf("Stats = %d, %d; want 5 entries of project 2", n, size)
	}
}

func TestChangeClearTools(t *testing.T) {
	c := New(1 << 20)
	for _, p := range []int64{1, 2} {
		for _, tool := range []string{"a", "b", "c"} {
			c.Put(p, tool, raw(`{"x":1}`), []byte("v"), time.Minute)
		}
	}
	c.ClearTools(1, "a", "c")
	c.ClearTools(1) // nothing
	for _, p := range []int64{1, 2} {
		for _, tool := range []string{"a", "b", "c"} {
			_, ok := c.Get(p, tool, raw(`{"x":1}`))
			if want := p == 2 || tool == "b"; ok != want {
				t.Errorf("project %d tool %s cached = %v, want %v", p, tool, ok, want)
			}
		}
	}
}

// TestConcurrent is for the race detector: gets, puts and clears at once
// never exceed the cap nor return a wrong result.
func TestConcurrent(t *testing.T) {
	const maxBytes = 50 * (100 + entryOverhead)
	c := New(maxBytes)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tool := fmt.Sprint("t", i%100)
				args := raw(fmt.Sprintf(`{"g":%d,"i":%d}`, g%2, i%7))
				want := strings.Repeat(tool, 100/len(tool)+1)[:100]
				if got, ok := c.Get(int64(g%3), tool, args); ok && string(got) != want {
					t.Errorf("Get(%s) = %q, want %q", tool, got, want)
					return
				}
				c.Put(int64(g%3), tool, args, []byte(want), time.Minute)
				if i%500 == 0 {
					c.ClearProject(int64(g % 3))
				}
			}
		})
	}
	wg.Wait()
	if _, size := c.Stats(); size > maxBytes {
		t.Errorf("size %d over the cap %d", size, maxBytes)
	}
}

var benchArgs = raw(`{"customer":"ada","status":"open","limit":10,"filters":{"since":"2026-01-01","tags":["a","b"]}}`)

func BenchmarkGetHit(b *testing.B) {
	c := New(64 << 20)
	c.Put(1, "search_orders", benchArgs, bytes.Repeat([]byte("x"), 2048), time.Hour)
	for b.Loop() {
		if _, ok := c.Get(1, "search_orders", benchArgs); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkGetHitParallel(b *testing.B) {
	c := New(64 << 20)
	c.Put(1, "search_orders", benchArgs, bytes.Repeat([]byte("x"), 2048), time.Hour)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := c.Get(1, "search_orders", benchArgs); !ok {
				b.Error("miss")
				return
			}
		}
	})
}

func BenchmarkPut(b *testing.B) {
	c := New(8 << 20) // small enough to evict all along
	result := bytes.Repeat([]byte("x"), 2048)
	i := 0
	for b.Loop() {
		c.Put(1, "search_orders", raw(fmt.Sprintf(`{"customer":"c%d","limit":10}`, i)), result, time.Hour)
		i++
	}
}

// A result cached with its decoded form hands that form to every hit, so a
// hit need not decode; it counts as a second copy of the bytes.
func TestDecodedResult(t *testing.T) {
	c := New(1 << 20)
	decoded := &struct{ Text string }{"hi"}
	c.PutDecoded(1, "t", raw(`{}`), []byte(`{"text":"hi"}`), decoded, time.Minute)
	b, d, ok := c.GetDecoded(1, "t", raw(`{}`))
	if !ok || string(b) != `{"text":"hi"}` || d != decoded {
		t.Fatalf("GetDecoded = %s, %v, %v; want the bytes and the same decoded value", b, d, ok)
	}
	if _, bytes := c.Stats(); bytes != 2*int64(len(`{"text":"hi"}`))+entryOverhead {
		t.Errorf("cache holds %d bytes, want two copies of the result plus the overhead", bytes)
	}
	c.Put(1, "u", raw(`{}`), []byte(`1`), time.Minute)
	if _, d, ok := c.GetDecoded(1, "u", raw(`{}`)); !ok || d != nil {
		t.Errorf("a result put without a decoded form: decoded %v, ok %v; want nil, true", d, ok)
	}
}

type sized int64

func (s sized) Size() int64 { return int64(s) }

// A decoded form that says its size is counted as that size: the results
// the gateway keeps encoded for each protocol era are larger than one copy.
func TestDecodedResultSize(t *testing.T) {
	c := New(4000)
	c.PutDecoded(1, "t", raw(`{}`), []byte(`{"text":"hi"}`), sized(1000), time.Minute)
	if _, bytes := c.Stats(); bytes != int64(len(`{"text":"hi"}`))+entryOverhead+1000 {
		t.Errorf("cache holds %d bytes, want the result, the overhead and the decoded form's 1000", bytes)
	}
	c.PutDecoded(1, "u", raw(`{}`), []byte(`{}`), sized(3000), time.Minute)
	if n, _ := c.Stats(); n != 1 {
		t.Errorf("%d entries after putting 2 of about 1,700 and 3,600 bytes in 4,000; want the older evicted", n)
	}
}

// checkAliases fails t unless every alias finds an entry the cache holds
// and every entry's aliases are in the alias map.
func checkAliases(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, el := range c.items {
		e := el.Value.(*entry)
		for _, a := range e.aliases[:e.nAliases] {
			if c.aliases[a] != el {
				t.Errorf("alias %x of entry %x does not find it", a[:4], e.key[:4])
			}
		}
		n += e.nAliases
	}
	if len(c.aliases) != n {
		t.Errorf("%d aliases in the map, %d in the entries", len(c.aliases), n)
	}
}

// A spelling of the arguments seen before finds its entry by its bytes;
// a new spelling is canonicalised, then remembered, up to maxAliases of
// them; the aliases go with their entry.
func TestAliases(t *testing.T) {
	c := New(1 << 20)
	c.Put(1, "search", raw(`{"a":1,"b":[1,2]}`), []byte("r"), time.Minute)
	spellings := []string{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, `{"a":1.0,"b":[1,2]}`, `{ "a":1,"b":[1,2]}`, `{"a":10e-1,"b":[1,2]}`, `{"b":[1.0,2],"a":1}`}
	for range 2 {
		for _, s := range spellings {
			if got, ok := c.Get(1, "search", raw(s)); !ok || string(got) != "r" {
				t.Errorf("Get(%s) = %q, %v; want a hit", s, got, ok)
			}
		}
	}
	checkAliases(t, c)
	if n := len(c.aliases); n != maxAliases {
		t.Errorf("%d aliases, want %d (the most an entry keeps)", n, maxAliases)
	}
	// Not the same arguments, nor another project's or tool's.
	for _, s := range []string{`{"a":1,"b":[2,1]}`, `{"a":1`} {
		if _, ok := c.Get(1, "search", raw(s)); ok {
			t.Errorf("Get(%s) hit", s)
		}
	}
	if _, ok := c.Get(2, "search", raw(spellings[0])); ok {
		t.Error("another project's call hit")
	}
	if _, ok := c.Get(1, "searc", raw(spellings[0])); ok {
		t.Error("another tool's call hit")
	}

	// Put again under another spelling: the old entry and its aliases go.
	c.Put(1, "search", raw(spellings[1]), []byte("r2"), time.Minute)
	checkAliases(t, c)
	if n := len(c.aliases); n != 1 {
		t.Errorf("%d aliases after a new Put, want 1", n)
	}
	if got, ok := c.Get(1, "search", raw(spellings[0])); !ok || string(got) != "r2" {
		t.Errorf("Get after a new Put = %q, %v; want r2", got, ok)
	}
	c.ClearTools(1, "search")
	if n, _ := c.Stats(); n != 0 || len(c.aliases) != 0 {
		t.Errorf("after ClearTools: %d entries, %d aliases; want none", n, len(c.aliases))
	}
	for _, s := range spellings {
		if _, ok := c.Get(1, "search", raw(s)); ok {
			t.Errorf("Get(%s) hit after ClearTools", s)
		}
	}
}

// An expired or evicted entry's aliases go with it.
func TestAliasesExpireAndEvict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		c.Put(1, "t", raw(`{"a":1}`), []byte("r"), time.Second)
		c.Get(1, "t", raw(`{ "a":1}`))
		time.Sleep(2 * time.Second)
		if _, ok := c.Get(1, "t", raw(`{"a":1}`)); ok {
			t.Error("an expired entry hit through its alias")
		}
		if n, _ := c.Stats(); n != 0 || len(c.aliases) != 0 {
			t.Errorf("after expiry: %d entries, %d aliases; want none", n, len(c.aliases))
		}
	})
	c := New(2 * (1 + entryOverhead))
	for i := range 5 {
		c.Put(1, "t", raw(fmt.Sprintf(`{"i":%d}`, i)), []byte("r"), time.Minute)
		c.Get(1, "t", raw(fmt.Sprintf(`{"i": %d}`, i)))
	}
	checkAliases(t, c)
	if n, _ := c.Stats(); n != 2 || len(c.aliases) != 4 {
		t.Errorf("after evictions: %d entries, %d aliases; want 2 and 4", n, len(c.aliases))
	}
}
