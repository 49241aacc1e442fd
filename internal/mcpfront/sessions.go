package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
)

// Sessions of the 2025 protocol live in go-sdk; the gateway adds what go-sdk
// does not know: how long a session has been unused, whether it holds a GET
// stream, and how many requests of it are in flight. From that it evicts
// the idlest session of a key over the cap, pings only sessions a ping can
// reach, and never closes a busy one for a missed ping.
//
// go-sdk's own ServerOptions.KeepAlive is not used: it pings every session,
// and a session without a GET stream cannot receive a ping, so it was closed
// at the first tick however busy it was.

// missesToClose is how many keepalive pings in a row a session with a GET
// stream may miss before it is closed.
const missesToClose = 3

// sessState is what the gateway knows of one session. Guarded by
// sessions.mu.
type sessState struct {
	calls    map[*context.CancelCauseFunc]bool // tool calls in flight
	lastUsed time.Time
	inflight int  // requests being served
	streams  int  // GET streams open
	misses   int  // keepalive pings missed in a row
	pinging  bool // a keepalive ping is on its way
	// logLevel is the level the client set with logging/setLevel, ""
	// until it does: go-sdk keeps it privately, and a call answered
	// before go-sdk (early.go) filters its log messages by it.
	logLevel string
	// early are the tool calls answered before go-sdk and in flight, by
	// request id: a notifications/cancelled for one ends it, as go-sdk's
	// would end its own.
	early map[jsonrpc.ID]context.CancelFunc
	// tasks: the client declared the tasks capability when it
	// initialized (go-sdk drops it from the parameters it keeps). A
	// client that did not is served required-task tools as jobs.
	tasks bool
	// asked are the requests early calls sent the client and wait for
	// the response to, by id (ask_stream.go).
	asked map[int64]chan *wire.Request
}

// sessions are the view's live sessions by id, pruned of closed ones.
type sessions struct {
	mu sync.Mutex
	m  map[string]*sessState
	// initMu serialises new sessions of the key, so the count checked
	// before one is made is still right when it is.
	initMu sync.Mutex
	asks   int64 // requests early calls sent the clients: ask_stream.go
}

// live returns the server's sessions by id.
func (v *view) live() map[string]*mcp.ServerSession {
	out := map[string]*mcp.ServerSession{}
	for s := range v.server.Sessions() {
		if id := s.ID(); id != "" {
			out[id] = s
		}
	}
	return out
}

// prune forgets sessions go-sdk has closed. Called with v.sess.mu held.
func (v *view) prune(live map[string]*mcp.ServerSession) {
	for id := range v.sess.m {
		if live[id] == nil {
			delete(v.sess.m, id)
		}
	}
}

// begin marks a request of session id as started (stream: a GET stream)
// and returns the function that marks it done. Unknown ids are left to
// go-sdk, which answers 404.
func (v *view) begin(id string, stream bool) (done func()) {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	s := v.sess.m[id]
	if s == nil {
		// A session whose first request arrived before [view.added] ran.
		v.sess.mu.Unlock()
		_, ok := v.live()[id]
		v.sess.mu.Lock()
		if !ok {
			return func() {}
		}
		if s = v.sess.m[id]; s == nil {
			s = &sessState{}
			v.sess.m[id] = s
		}
	}
	s.lastUsed = time.Now()
	if stream {
		s.streams++
	} else {
		s.inflight++
	}
	return func() {
		v.sess.mu.Lock()
		defer v.sess.mu.Unlock()
		s.lastUsed = time.Now()
		if stream {
			s.streams--
		} else {
			s.inflight--
		}
	}
}

// admit makes room for one more session of the key: over the cap it closes
// the session idle longest. It returns false when every session is busy.
// Called with v.sess.initMu held.
func (v *view) admit(max int) bool {
	live := v.live()
	v.sess.mu.Lock()
	v.prune(live)
	var victims []*mcp.ServerSession
	for n := len(live); n >= max; n-- {
		id := ""
		for sid, s := range v.sess.m {
			if s.inflight == 0 && (id == "" || s.lastUsed.Before(v.sess.m[id].lastUsed)) {
				id = sid
			}
		}
		if id == "" {
			v.sess.mu.Unlock()
			return false
		}
		delete(v.sess.m, id)
		victims = append(victims, live[id])
	}
	v.sess.mu.Unlock()
	for _, s := range victims {
		v.f.log.Info("mcp session closed: the key is at its session cap", "key", v.key.ID, "session", s.ID(), "cap", max)
		s.Close()
	}
	return true
}

// added records a session go-sdk has just made.
func (v *view) added(id string, tasks bool) {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	if v.sess.m[id] == nil {
		v.sess.m[id] = &sessState{lastUsed: time.Now()}
	}
	v.sess.m[id].tasks = tasks
}

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

// declaredTasks reports whether session id's client declared the tasks
// capability.
func (v *view) declaredTasks(id string) bool {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	s := v.sess.m[id]
	return s != nil && s.tasks
}

// trackEarly notes a tool call of session id answered before go-sdk, so
// that the client's notifications/cancelled for request rid reaches it;
// ok is false when the gateway does not know the session (yet): then
// go-sdk serves the call.
func (v *view) trackEarly(id string, rid jsonrpc.ID, cancel context.CancelFunc) (forget func(), ok bool) {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	s := v.sess.m[id]
	if s == nil {
		return nil, false
	}
	if _, dup := s.early[rid]; dup {
		return nil, false // go-sdk answers a duplicate request id
	}
	if s.early == nil {
		s.early = map[jsonrpc.ID]context.CancelFunc{}
	}
	s.early[rid] = cancel
	return func() {
		v.sess.mu.Lock()
		defer v.sess.mu.Unlock()
		delete(s.early, rid)
	}, true
}

// cancelEarly passes a session's notifications/cancelled (req) to the
// call answered before go-sdk that it names, if any. go-sdk gets the
// notification too, and ignores an id it does not serve.
func (v *view) cancelEarly(id string, req *wire.Request) {
	if req.Method != "notifications/cancelled" || len(req.RequestID) == 0 {
		return
	}
	v.sess.mu.Lock()
	s := v.sess.m[id]
	none := s == nil || len(s.early) == 0
	v.sess.mu.Unlock()
	if none {
		return
	}
	var raw any
	if json.Unmarshal(req.RequestID, &raw) != nil {
		return
	}
	rid, err := jsonrpc.MakeID(raw)
	if err != nil {
		return
	}
	v.sess.mu.Lock()
	cancel := s.early[rid]
	v.sess.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// count returns how many sessions the key has open.
func (v *view) count() int { return len(v.live()) }

// SessionCount returns how many MCP sessions client key keyID has open.
func (f *Front) SessionCount(keyID string) int {
	f.mu.Lock()
	v := f.views[keyID]
	f.mu.Unlock()
	if v == nil {
		return 0
	}
	return v.count()
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
			each = func(v *view) { v.ping(interval) }
		case <-sweeps.C:
			each = func(v *view) { v.closeIdle(idle) }
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

// closeIdle closes the view's sessions that have had no request, and no
// GET stream, for longer than idle.
func (v *view) closeIdle(idle time.Duration) {
	live := v.live()
	v.sess.mu.Lock()
	v.prune(live)
	var idlers []*mcp.ServerSession
	for id, s := range v.sess.m {
		if s.inflight == 0 && s.streams == 0 && time.Since(s.lastUsed) > idle {
			delete(v.sess.m, id)
			idlers = append(idlers, live[id])
		}
	}
	v.sess.mu.Unlock()
	for _, s := range idlers {
		v.f.log.Info("mcp session closed: idle", "key", v.key.ID, "session", s.ID(), "idle", idle)
		s.Close()
	}
}

// ping sends one keepalive ping to each of the view's sessions that a ping
// can reach, and closes those that missed missesToClose in a row.
func (v *view) ping(interval time.Duration) {
	live := v.live()
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	v.prune(live)
	for id, s := range v.sess.m {
		if s.pinging {
			continue // the last ping has not come back or timed out yet
		}
		if s.streams == 0 || s.inflight > 0 {
			s.misses = 0 // a busy session is alive, and one without a stream cannot be pinged
			continue
		}
		s.pinging = true
		go func(ss *mcp.ServerSession, s *sessState) {
			// A ping has the whole interval to come back: s.pinging keeps
			// the next tick from sending another one meanwhile.
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			err := ss.Ping(ctx, nil)
			cancel()
			v.sess.mu.Lock()
			s.pinging = false
			if err == nil {
				s.misses = 0
				v.sess.mu.Unlock()
				return
			}
			s.misses++
			closeIt := s.misses >= missesToClose
			v.sess.mu.Unlock()
			if closeIt {
				v.f.log.Info("mcp session closed: it missed keepalive pings", "key", v.key.ID, "session", ss.ID(), "misses", missesToClose, "err", err)
				ss.Close()
			}
		}(live[id], s)
	}
}

// noteSession is the receiving middleware that keeps what the early path
// needs of a session and go-sdk does not export: the log level its client
// set.
func (v *view) noteSession(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "logging/setLevel" || err != nil {
			return res, err
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		p, ok2 := req.GetParams().(*mcp.SetLoggingLevelParams)
		if !ok || !ok2 || p == nil || ss.ID() == "" {
			return res, err
		}
		v.sess.mu.Lock()
		if s := v.sess.m[ss.ID()]; s != nil {
			s.logLevel = string(p.Level)
		}
		v.sess.mu.Unlock()
		return res, err
	}
}

// logLevel returns the log level the client of session id set, "" for none.
func (v *view) logLevel(id string) string {
	v.sess.mu.Lock()
	defer v.sess.mu.Unlock()
	if s := v.sess.m[id]; s != nil {
		return s.logLevel
	}
	return ""
}
