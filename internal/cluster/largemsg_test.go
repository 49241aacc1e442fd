package cluster

import (
	"bytes"
	"testing"
)

// Parts come together in order; anything else is dropped, never handed on
// half.
func TestPartsAssemble(t *testing.T) {
	var ps parts
	if w, err := ps.add("m1 0 3", []byte("ab")); w != nil || err != nil {
		t.Fatalf("first of three: %q %v", w, err)
	}
	if w, err := ps.add("m1 1 3", []byte("cd")); w != nil || err != nil {
		t.Fatalf("second of three: %q %v", w, err)
	}
	if w, err := ps.add("m1 2 3", []byte("ef")); !bytes.Equal(w, []byte("abcdef")) || err != nil {
		t.Fatalf("last of three: %q %v, want abcdef", w, err)
	}
	if len(ps.open) != 0 {
		t.Errorf("a finished message is still kept: %v", ps.open)
	}
	for _, c := range []struct{ header, why string }{
		{"m2 1 2", "a part without its first"},
		{"m3 0", "malformed"},
		{"m3 x 2", "malformed"},
		{"m3 2 2", "malformed"},
		{"m3 0 0", "malformed"},
	} {
		if w, err := ps.add(c.header, []byte("x")); w != nil || err == nil {
			t.Errorf("%q: %q %v, want an error (%s)", c.header, w, err, c.why)
		}
	}
	ps.add("m4 0 3", []byte("a"))
	if w, err := ps.add("m4 2 3", []byte("c")); w != nil || err == nil {
		t.Errorf("a skipped part: %q %v, want an error", w, err)
	}
	if _, ok := ps.open["m4"]; ok {
		t.Error("a message with a skipped part is still kept")
	}
}
