package schema

import (
	"encoding/json"
	"runtime"
	"sync"
	"testing"
)

// 100 replicas registering one schema share one compiled copy; another
// text, or other options, get their own; a schema nobody holds is dropped.
func TestCacheCompilesOnce(t *testing.T) {
	var c Cache
	raw := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)
	got := make([]*Schema, 100)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			s, err := c.Compile(raw, Options{Default2020: true})
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for i, s := range got {
		if s != got[0] {
			t.Fatalf("replica %d got a schema of its own", i)
		}
	}
	if n := c.Len(); n != 1 {
		t.Errorf("cache holds %d schemas, want 1", n)
	}
	other, _ := c.Compile(raw, Options{})
	if other == got[0] {
		t.Error("the same text read as draft-07 shares the 2020-12 schema")
	}
	if err := other.Validate(json.RawMessage(`{"id":"x"}`)); err != nil {
		t.Error(err)
	}
	if _, err := c.Compile(json.RawMessage(`{"type":3}`), Options{}); err == nil {
		t.Error("a schema that does not compile compiled")
	}
	if n := c.Len(); n != 2 {
		t.Errorf("cache holds %d schemas, want 2", n)
	}

	got, other = nil, nil
	for range 100 {
		runtime.GC()
		if c.Len() == 0 {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("cache still holds %d schemas nobody uses", c.Len())
}
