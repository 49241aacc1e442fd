package mcpfront

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

// trackCall notes a tool call in flight in session id, so closing the
// session can end it; it returns the function that forgets it.
func (v *view) trackCall(id string, cancel context.CancelCauseFunc) (forget func()) {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	s := v.sess.m[id]
	if s == nil {
		return func() {}
	}
	if s.calls == nil {
		s.calls = map[*context.CancelCauseFunc]bool{}
	}
	s.calls[&cancel] = true
	return func() {
		v.sess.mu.Lock()
		defer v.sess.mu.Unlock()
		delete(s.calls, &cancel)
	}
}

// endCalls ends the tool calls in flight in session id and waits, up to
// wait, until the session has no request in flight. go-sdk drops the
// answers of calls still running when a session closes, and waits for them
// to return first: ended here, they answer at once with an error that says
// what happened.
func (v *view) endCalls(id string, wait time.Duration) {
	v.sess.mu.Lock()
	s := v.sess.m[id]
	if s == nil {
		v.sess.mu.Unlock()
		return
	}
	for c := range s.calls {
		(*c)(pipeline.ErrSessionClosed)
	}
	v.sess.mu.Unlock()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		v.sess.mu.Lock()
		busy := s.inflight > 0
		v.sess.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serveSession serves a request of the 2025 protocol: it keeps the key's
// sessions within the cap, notes what each session is doing, and ends the
// calls of a session its client deletes.
func (f *Front) serveSession(w http.ResponseWriter, r *http.Request, req *wire.Request, v *view) {
	id := r.Header.Get("Mcp-Session-Id")
	switch {
	case r.Method == http.MethodPost && id == "":
		// A new session: the body was read (in dispatch) before taking the
		// key's lock, so a slow client does not hold up the key's other
		// clients.
		v.sess.initMu.Lock()
		defer v.sess.initMu.Unlock()
		if !v.admit(f.maxSessions) {
			refuseCall(w, http.StatusTooManyRequests, req.CallID(), codeLimit, fmt.Sprintf(msgTooManySessions, f.maxSessions))
			return
		}
		// Recorded before the answer leaves: the client's next request,
		// sent the moment it reads the session id, must find it.
		tasks := req.DeclaresTasks()
		f.stateful.ServeHTTP(&sessionStart{ResponseWriter: w, started: func(nid string) { v.added(nid, tasks) }}, r)
	case id == "":
		f.stateful.ServeHTTP(w, r)
	case r.Method == http.MethodDelete:
		v.endCalls(id, 5*time.Second)
		f.stateful.ServeHTTP(w, r)
	case r.Method == http.MethodGet:
		defer v.begin(id, true)()
		w, done := v.listenTasks(id, w)
		defer done()
		f.stateful.ServeHTTP(w, r)
	default:
		defer v.begin(id, false)()
		if r.Method == http.MethodPost {
			if v.deliver(id, req) {
				// The client's response to a request an early call sent
				// (ask_stream.go): accepted, as go-sdk accepts one.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			v.cancelEarly(id, req)
			if f.answerTaskCall(w, r, req, v, id) || f.answerEarly(w, r, req, v, id) {
				return
			}
		}
		f.serveInSession(w, r)
	}
}

// serveInSession has go-sdk serve a request of a session. go-sdk runs a
// session's calls in the session's context; the call ends when this
// request's client hangs up all the same: its tool handler finds the
// request, and its context, in the token info (request.go).
func (f *Front) serveInSession(w http.ResponseWriter, r *http.Request) {
	f.stateful.ServeHTTP(w, r)
}
