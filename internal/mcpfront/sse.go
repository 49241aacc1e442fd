package mcpfront

import "net/http"

// sseStream is an early answer as go-sdk writes one: SSE events, the
// headers going out with the first.
type sseStream struct {
	w       http.ResponseWriter
	started bool
}

// event writes one SSE event carrying msg.
func (s *sseStream) event(msg []byte) {
	if !s.started {
		sseHeaders(s.w.Header(), "text/event-stream")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	s.w.Write(sseEvent(msg))
}

// notify sends a notification of the request as an event, at once: the
// client sees it while the call goes on.
func (s *sseStream) notify(method string, params any) {
	msg, err := notification(method, params)
	if err != nil {
		return
	}
	s.event(msg)
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// notifyRaw sends msg, a JSON-RPC message already encoded, as an event,
// at once.
func (s *sseStream) notifyRaw(msg []byte) {
	s.event(msg)
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// plain writes msg as a plain JSON body with status, as go-sdk writes a
// 2026-07-28 protocol error. Once events went out, the status can no
// longer change: msg goes as one more event. (go-sdk v1.8.0 writes it
// unframed there, which no client can read; this is the one place the
// early path answers differently, on purpose.)
func (s *sseStream) plain(status int, msg []byte) {
	if s.started {
		s.event(msg)
		return
	}
	sseHeaders(s.w.Header(), "application/json")
	s.w.WriteHeader(status)
	s.started = true
	s.w.Write(msg)
}
