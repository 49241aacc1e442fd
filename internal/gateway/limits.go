package gateway

import (
	"io"
	"net/http"
	"time"
)

// withTimeouts bounds how long a client may take to send its request body
// and to take each write of the response. http.Server's ReadTimeout and
// WriteTimeout cannot do this here: they span the whole request, which
// would cut off the SSE streams that carry MCP sessions, progress and the
// dashboard's live log. The deadlines are per step instead: the body must
// arrive within body, and each write must complete within write, so a
// stream lives as long as its client reads.
//
// Connections that are hijacked (the agent WebSocket) must not pass through
// here: deadlines set on them would outlive the request.
func withTimeouts(next http.Handler, body, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(body))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: write}
		next.ServeHTTP(dw, r)
		// The server writes what is buffered once the handler returns.
		_ = rc.SetWriteDeadline(time.Now().Add(write))
	})
}

// deadlineBody lifts the read deadline once the body is read, so the
// server's wait for a hang-up during a long response does not time out.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter gives each write of the response its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
