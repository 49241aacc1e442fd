package mcpfront

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

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
		v.sess.Lock()
		defer v.sess.Unlock()
		if !v.sess.Admit(f.maxSessions) {
			refuseCall(w, http.StatusTooManyRequests, req.CallID(), codeLimit, fmt.Sprintf(msgTooManySessions, f.maxSessions))
			return
		}
		// Recorded before the answer leaves: the client's next request,
		// sent the moment it reads the session id, must find it.
		tasks := req.DeclaresTasks()
		f.stateful.ServeHTTP(&sessionStart{ResponseWriter: w, started: func(nid string) { v.sess.Added(nid, tasks) }}, r)
	case id == "":
		f.stateful.ServeHTTP(w, r)
	case r.Method == http.MethodDelete:
		v.sess.EndCalls(id, 5*time.Second)
		f.stateful.ServeHTTP(w, r)
	case r.Method == http.MethodGet:
		defer v.sess.Begin(id, true)()
		w, done := v.sess.ListenTasks(id, w)
		defer done()
		f.stateful.ServeHTTP(w, r)
	default:
		defer v.sess.Begin(id, false)()
		if r.Method == http.MethodPost {
			if v.sess.Deliver(id, req) {
				// The client's response to a request an early call sent
				// (session/ask_stream.go): accepted, as go-sdk accepts one.
				w.WriteHeader(http.StatusAccepted)
				return
			}
			v.sess.CancelEarly(id, req)
			if f.era.AnswerTaskCall(w, r, req, v.sess, id) || f.answerEarly(w, r, req, v, id) {
				return
			}
		}
		f.serveInSession(w, r)
	}
}

// serveInSession has go-sdk serve a request of a session. go-sdk runs a
// session's calls in the session's context; the call ends when this
// request's client hangs up all the same: its tool handler finds the
// request, and its context, in the token info (wire/request.go).
func (f *Front) serveInSession(w http.ResponseWriter, r *http.Request) {
	f.stateful.ServeHTTP(w, r)
}
