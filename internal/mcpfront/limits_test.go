package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

func TestArgsHelpers(t *testing.T) {
	if got := bodyLimit(1 << 20); got != 4<<20 {
		t.Errorf("bodyLimit(1 MiB) = %d, want go-sdk's 4 MiB", got)
	}
	if got := bodyLimit(8 << 20); got != 9<<20 {
		t.Errorf("bodyLimit(8 MiB) = %d, want 9 MiB", got)
	}
}

// shortBody sends n bytes of a longer body, then fails as a connection
// closed mid-body does.
type shortBody struct{ n int }

func (s *shortBody) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), s.n)
	for i := range p[:k] {
		p[i] = ' '
	}
	s.n -= k
	return k, nil
}

func (s *shortBody) Close() error { return nil }

// A client that declares a body near the limit and sends a few bytes costs
// the gateway what it sent, not what it declared, and is told the body
// could not be read; a body over the limit is still told the limit.
func TestBodyAllocatedAsItArrives(t *testing.T) {
	const argLimit = 8 << 20
	limit := bodyLimit(argLimit)
	post := func(body io.ReadCloser, declared int64) (*httptest.ResponseRecorder, *http.Request) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.ContentLength = declared
		r.Body = http.MaxBytesReader(w, body, limit)
		return w, r
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 10
	for range runs {
		_, r := post(&shortBody{n: 100}, limit)
		body, err := wire.ReadBody(r)
		if len(body) != 100 || err != io.ErrUnexpectedEOF || cap(body) > wire.FirstBodyBuffer {
			t.Fatalf("wire.ReadBody = %d bytes (cap %d), %v; want the 100 sent, in at most %d, and io.ErrUnexpectedEOF", len(body), cap(body), err, wire.FirstBodyBuffer)
		}
	}
	runtime.ReadMemStats(&after)
	if got := (after.TotalAlloc - before.TotalAlloc) / runs; got > 1<<20 {
		t.Errorf("a body declared as %d bytes that sent 100 allocated %d bytes per request; want well under 1 MiB", limit, got)
	}

	message := func(w *httptest.ResponseRecorder) string {
		var out struct {
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(w.Body.Bytes(), &out)
		return out.Error.Message
	}
	w, r := post(&shortBody{n: 100}, limit)
	if want := "The gateway could not read the request body: unexpected EOF"; !(&Front{}).refuseLargeArgs(w, r, wire.Read(r), argLimit) ||
		w.Code != http.StatusBadRequest || message(w) != want {
		t.Errorf("a body cut short = %d %s; want 400 %q", w.Code, w.Body, want)
	}
	w, r = post(&shortBody{n: int(limit) + 1}, -1)
	want := fmt.Sprintf(msgBodyOverLimit, "9,437,184", "8,388,608")
	if !(&Front{}).refuseLargeArgs(w, r, wire.Read(r), argLimit) || w.Code != http.StatusRequestEntityTooLarge || message(w) != want {
		t.Errorf("a body over the limit = %d %s; want 413 %q", w.Code, w.Body, want)
	}

	// An honest body is read whole, into a buffer of about its size.
	sent := bytes.Repeat([]byte("x"), 300<<10)
	_, r = post(io.NopCloser(iotest.HalfReader(bytes.NewReader(sent))), int64(len(sent)))
	body, err := wire.ReadBody(r)
	if err != nil || !bytes.Equal(body, sent) || cap(body) > len(sent)+len(sent)/8 {
		t.Errorf("an honest body: %d bytes (cap %d), %v; want its %d bytes in a buffer of its size", len(body), cap(body), err, len(sent))
	}
	if again, _ := wire.ReadBody(r); &again[0] != &body[0] {
		t.Errorf("a body read before was read again")
	}
}
