package wire

import "net/http"

// SSEStream is an early answer as go-sdk writes one: SSE events, the
// headers going out with the first.
type SSEStream struct {
	W       http.ResponseWriter
	started bool
}

// Event writes one SSE Event carrying msg.
func (s *SSEStream) Event(msg []byte) {
	if !s.started {
		SSEHeaders(s.W.Header(), "text/event-stream")
		s.W.WriteHeader(http.StatusOK)
		s.started = true
	}
	s.W.Write(SSEEvent(msg))
}

// Notify sends a notification of the request as an event, at once: the
// client sees it while the call goes on.
func (s *SSEStream) Notify(method string, params any) {
	msg, err := Notification(method, params)
	if err != nil {
		return
	}
	s.Event(msg)
	if fl, ok := s.W.(http.Flusher); ok {
		fl.Flush()
	}
}

// NotifyRaw sends msg, a JSON-RPC message already encoded, as an event,
// at once.
func (s *SSEStream) NotifyRaw(msg []byte) {
	s.Event(msg)
	if fl, ok := s.W.(http.Flusher); ok {
		fl.Flush()
	}
}

// Plain writes msg as a Plain JSON body with status, as go-sdk writes a
// 2026-07-28 protocol error. Once events went out, the status can no
// longer change: msg goes as one more event. (go-sdk v1.8.0 writes it
// unframed there, which no client can read; this is the one place the
// early path answers differently, on purpose.)
func (s *SSEStream) Plain(status int, msg []byte) {
	if s.started {
		s.Event(msg)
		return
	}
	SSEHeaders(s.W.Header(), "application/json")
	s.W.WriteHeader(status)
	s.started = true
	s.W.Write(msg)
}
