package session

import (
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/tasks"
)

// The status notifications of 2025-11-25 tasks (notifications/tasks/status),
// which the spec makes optional and clients must not rely on: each change
// of a task a session created goes to that session's GET streams, if it
// has any open. go-sdk v1.8.0 sends no notification it does not know, so
// the gateway writes this one itself, between go-sdk's events.

// sessionTasks are, by session id, the tasks a view's 2025-11-25 sessions
// created and the GET streams they listen on, for their status
// notifications.
type sessionTasks struct {
	mu sync.Mutex
	m  map[string]*watchedTasks
}

// watchedTasks are one session's.
type watchedTasks struct {
	ids     map[string]bool // tasks not ended yet
	streams map[*taskStream]bool
	unsub   func() // from the runtime's status changes
}

// watchTask sends the session ss the status changes of task id until it
// ends or the session does.
func (v *Sessions) watchTask(ss *mcp.ServerSession, id string) {
	sid := ss.ID()
	v.watched.mu.Lock()
	defer v.watched.mu.Unlock()
	if v.watched.m == nil {
		v.watched.m = map[string]*watchedTasks{}
	}
	w := v.watched.m[sid]
	if w == nil {
		w = &watchedTasks{ids: map[string]bool{}, streams: map[*taskStream]bool{}}
		v.watched.m[sid] = w
	}
	if w.unsub == nil {
		w.unsub = v.era.tasks.Subscribe(func(t tasks.Task) { v.taskChanged(sid, t) })
		go func() {
			ss.Wait()
			v.forgetTasks(sid)
		}()
	}
	w.ids[id] = true
}

// forgetTasks stops the status notifications of session sid, which ended.
func (v *Sessions) forgetTasks(sid string) {
	v.watched.mu.Lock()
	w := v.watched.m[sid]
	delete(v.watched.m, sid)
	v.watched.mu.Unlock()
	if w != nil && w.unsub != nil {
		w.unsub()
	}
}

// taskChanged sends task t's status to session sid's GET streams, if sid
// created it. It runs on the runtime's goroutine: it only queues.
func (v *Sessions) taskChanged(sid string, t tasks.Task) {
	v.watched.mu.Lock()
	w := v.watched.m[sid]
	if w == nil || !w.ids[t.ID] {
		v.watched.mu.Unlock()
		return
	}
	if t.Status.Terminal() {
		delete(w.ids, t.ID)
	}
	streams := make([]*taskStream, 0, len(w.streams))
	for s := range w.streams {
		streams = append(streams, s)
	}
	v.watched.mu.Unlock()
	if len(streams) == 0 {
		return // optional, and the client polls: nowhere to send it
	}
	msg, err := wire.Notification("notifications/tasks/status", wireTask(t))
	if err != nil {
		return
	}
	for _, s := range streams {
		select {
		case s.queue <- msg:
		default: // a client that reads this slowly polls anyway
		}
	}
}

// ListenTasks returns the writer a GET stream of session sid is served
// with: for a 2025-11-25 session, one that carries its tasks' status
// notifications too, until done is called.
func (v *Sessions) ListenTasks(sid string, w http.ResponseWriter) (_ http.ResponseWriter, done func()) {
	if v.era.tasks == nil || !taskSession(v.SessionOf(sid)) {
		return w, func() {}
	}
	s := &taskStream{ResponseWriter: w, queue: make(chan []byte, 16), stop: make(chan struct{})}
	v.watched.mu.Lock()
	if v.watched.m == nil {
		v.watched.m = map[string]*watchedTasks{}
	}
	wt := v.watched.m[sid]
	if wt == nil {
		// No task yet: its status changes are watched from its first.
		wt = &watchedTasks{ids: map[string]bool{}, streams: map[*taskStream]bool{}}
		v.watched.m[sid] = wt
	}
	wt.streams[s] = true
	v.watched.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case msg := <-s.queue:
				s.inject(msg)
			case <-s.stop:
				return
			}
		}
	}()
	return s, func() {
		close(s.stop)
		<-finished
		v.watched.mu.Lock()
		if wt := v.watched.m[sid]; wt != nil {
			delete(wt.streams, s)
			if len(wt.streams) == 0 && len(wt.ids) == 0 && wt.unsub == nil {
				delete(v.watched.m, sid)
			}
		}
		v.watched.mu.Unlock()
	}
}

// taskStream is a session's GET stream as go-sdk writes it, with the
// gateway's status notifications written between go-sdk's events: go-sdk
// writes each event in one Write, so a lock around each write keeps both
// whole.
type taskStream struct {
	http.ResponseWriter
	queue chan []byte
	stop  chan struct{}

	mu      sync.Mutex
	started bool // go-sdk opened the event stream
}

func (s *taskStream) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = code == http.StatusOK && s.Header().Get("Content-Type") == "text/event-stream"
	s.ResponseWriter.WriteHeader(code)
}

func (s *taskStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ResponseWriter.Write(b)
}

func (s *taskStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *taskStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// inject writes msg as one event of the stream, once go-sdk opened it.
func (s *taskStream) inject(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return
	}
	s.ResponseWriter.Write(wire.SSEEvent(msg))
	http.NewResponseController(s.ResponseWriter).Flush()
}
