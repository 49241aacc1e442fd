package mcpfront

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHandedWriter: go-sdk's answer to a handed-over call follows the
// early events; its own status goes out only when no event did, and an
// error it answers after events (its plain-text body) is dropped rather
// than written into the event stream.
func TestHandedWriter(t *testing.T) {
	cases := []struct {
		name      string
		early     bool // the early path sent an event first
		status    int
		body      string
		wantCode  int
		wantBody  string
		wantCType string
	}{
		{"go-sdk answers first", false, http.StatusOK, "event: message\ndata: {}\n\n", http.StatusOK, "event: message\ndata: {}\n\n", "text/event-stream"},
		{"go-sdk refuses first", false, http.StatusNotFound, "session not found\n", http.StatusNotFound, "session not found\n", "text/plain"},
		{"go-sdk goes on after events", true, http.StatusOK, "event: message\ndata: {}\n\n", http.StatusOK, "event: message\ndata: 1\n\nevent: message\ndata: {}\n\n", "text/event-stream"},
		{"go-sdk refuses after events", true, http.StatusNotFound, "session not found\n", http.StatusOK, "event: message\ndata: 1\n\n", "text/event-stream"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		out := &sseStream{w: rec}
		if c.early {
			out.event([]byte("1"))
		}
		w := handedWriter{out, new(bool)}
		if c.status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(c.status)
		w.Write([]byte(c.body))
		w.Flush()
		// What went out: the headers as they were at the status.
		res := rec.Result()
		if res.StatusCode != c.wantCode || rec.Body.String() != c.wantBody || res.Header.Get("Content-Type") != c.wantCType {
			t.Errorf("%s: %d %q %q; want %d %q %q", c.name, res.StatusCode, res.Header.Get("Content-Type"), rec.Body, c.wantCode, c.wantCType, c.wantBody)
		}
	}
}
