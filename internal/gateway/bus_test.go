package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The owner of a held call is read from the start of its requestState,
// and the body reaches the handler whole either way.
func TestHeldCallOwner(t *testing.T) {
	long := `{"params":{"arguments":{"x":"` + strings.Repeat("a", statePeek) + `"},"requestState":"gw-FAR.abc"}}`
	for _, c := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","params":{"name":"t","requestState":"gw-ABC123.c2VhbGVk"}}`, "gw-ABC123"},
		{"{\"params\":{\"requestState\" :\n \"gw-X.y\"}}", "gw-X"},
		{`{"params":{"name":"t"}}`, ""},
		{`{"params":{"requestState":"c2VhbGVk"}}`, ""}, // one gateway alone: no prefix
		{`{"params":{"requestState":"gw-` + strings.Repeat("Z", 40) + `.x"}}`, ""},
		{long, ""}, // past the peek: served where it landed
	} {
		r, _ := http.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
		if got := heldCallOwner(r); got != c.want {
			t.Errorf("owner of %.60q = %q, want %q", c.body, got, c.want)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != c.body {
			t.Errorf("body after the peek has %d bytes, want the %d sent", len(b), len(c.body))
		}
	}
}
