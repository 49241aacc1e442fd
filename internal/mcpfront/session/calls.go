package session

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
)

// TrackCall notes a tool call in flight in session id, so closing the
// session can end it; it returns the function that forgets it.
func (v *Sessions) TrackCall(id string, cancel context.CancelCauseFunc) (forget func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
	if s == nil {
		return func() {}
	}
	if s.calls == nil {
		s.calls = map[*context.CancelCauseFunc]bool{}
	}
	s.calls[&cancel] = true
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(s.calls, &cancel)
	}
}

// EndCalls ends the tool calls in flight in session id and waits, up to
// wait, until the session has no request in flight. go-sdk drops the
// answers of calls still running when a session closes, and waits for them
// to return first: ended here, they answer at once with an error that says
// what happened.
func (v *Sessions) EndCalls(id string, wait time.Duration) {
	v.mu.Lock()
	s := v.m[id]
	if s == nil {
		v.mu.Unlock()
		return
	}
	for c := range s.calls {
		(*c)(pipeline.ErrSessionClosed)
	}
	v.mu.Unlock()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		v.mu.Lock()
		busy := s.inflight > 0
		v.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SessionOf returns the view's live session id, or nil. It walks the
// view's sessions, as go-sdk keeps them: a few per key as clients use them.
func (v *Sessions) SessionOf(id string) *mcp.ServerSession {
	for s := range v.server.Sessions() {
		if s.ID() == id {
			return s
		}
	}
	return nil
}
