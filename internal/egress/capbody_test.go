package egress

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// A body at the cap reads whole; one byte over fails, never cut short.
func TestCapBody(t *testing.T) {
	tooLarge := errors.New("too large")
	for _, tc := range []struct {
		body string
		err  error
	}{
		{"", nil},
		{"abc", nil},
		{"abcd", nil},
		{"abcde", tooLarge},
		{strings.Repeat("x", 100), tooLarge},
	} {
		got, err := io.ReadAll(CapBody(io.NopCloser(strings.NewReader(tc.body)), 4, tooLarge))
		if !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) {
			t.Errorf("%q: %v, want %v", tc.body, err, tc.err)
		}
		if tc.err == nil && string(got) != tc.body {
			t.Errorf("%q read as %q", tc.body, got)
		}
	}
}
