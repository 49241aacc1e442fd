package mcpfront

import (
	"net/http"
	"time"
)

// sessionStart passes a session's first answer through, and calls
// started with the new session's id before its header is written.
type sessionStart struct {
	http.ResponseWriter
	started func(id string)
	noted   bool
}

func (w *sessionStart) note() {
	if w.noted {
		return
	}
	w.noted = true
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.started(id)
	}
}

func (w *sessionStart) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionStart) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

func (w *sessionStart) Flush() {
	w.note()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionStart) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// SessionCount returns how many MCP sessions client key keyID has open.
func (f *Front) SessionCount(keyID string) int {
	f.mu.Lock()
	v := f.views[keyID]
	f.mu.Unlock()
	if v == nil {
		return 0
	}
	return v.sess.Count()
}

// keepAlive pings, every interval, the sessions that hold a GET stream and
// have nothing in flight, and closes sessions idle for longer than idle,
// until stop closes.
func (f *Front) keepAlive(interval, idle time.Duration, stop <-chan struct{}) {
	pings := time.NewTicker(interval)
	defer pings.Stop()
	sweeps := time.NewTicker(min(max(idle/4, 10*time.Millisecond), time.Minute))
	defer sweeps.Stop()
	viewSweeps := time.NewTicker(min(max(f.viewIdle/4, 10*time.Millisecond), time.Minute))
	defer viewSweeps.Stop()
	for {
		var each func(*view)
		select {
		case <-stop:
			return
		case <-viewSweeps.C:
			f.sweepViews(f.viewIdle)
			continue
		case <-pings.C:
			each = func(v *view) { v.sess.Ping(interval) }
		case <-sweeps.C:
			each = func(v *view) { v.sess.CloseIdle(idle) }
		}
		f.mu.Lock()
		vs := make([]*view, 0, len(f.views))
		for _, v := range f.views {
			vs = append(vs, v)
		}
		f.mu.Unlock()
		for _, v := range vs {
			each(v)
		}
	}
}
