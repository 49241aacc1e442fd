package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/tasks"
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
	// before go-sdk (mcpfront/early.go) filters its log messages by it.
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

// Era is the 2025 session era's part of the endpoint that every client
// key's sessions share.
type Era struct {
	tasks    *tasks.Manager // nil: no tasks
	pipe     *pipeline.Pipeline
	reg      *agents.Registry
	controls *access.Cache
	log      *slog.Logger
	impl     *mcp.Implementation
}

// Options configure an [Era].
type Options struct {
	Tasks    *tasks.Manager
	Pipeline *pipeline.Pipeline
	Registry *agents.Registry
	Controls *access.Cache
	Logger   *slog.Logger
	// Impl is the gateway as results name it.
	Impl *mcp.Implementation
}

// New returns the session era's shared part.
func New(o Options) *Era {
	return &Era{tasks: o.Tasks, pipe: o.Pipeline, reg: o.Registry, controls: o.Controls, log: o.Logger, impl: o.Impl}
}

// Sessions are one client key's 2025 sessions, as the gateway knows them
// beside go-sdk: by id, pruned of closed ones; their 2025-11-25 tasks; the
// questions its early calls put to their clients.
type Sessions struct {
	era    *Era
	key    store.Key
	server *mcp.Server // the key's go-sdk server, which holds the sessions

	mu sync.Mutex
	m  map[string]*sessState
	// initMu serialises new sessions of the key, so the count checked
	// before one is made is still right when it is.
	initMu sync.Mutex
	asks   int64 // requests early calls sent the clients: ask_stream.go

	watched sessionTasks // the tasks its 2025-11-25 sessions created (tasks.go)
}

// ForKey returns the sessions of client key key, whose go-sdk server is
// server.
func (e *Era) ForKey(key store.Key, server *mcp.Server) *Sessions {
	return &Sessions{era: e, key: key, server: server, m: map[string]*sessState{}}
}

// Lock serialises the start of the key's new sessions (see [Sessions.Admit]).
func (v *Sessions) Lock() { v.initMu.Lock() }

// Unlock ends what Lock began.
func (v *Sessions) Unlock() { v.initMu.Unlock() }

// live returns the server's sessions by id.
func (v *Sessions) live() map[string]*mcp.ServerSession {
	out := map[string]*mcp.ServerSession{}
	for s := range v.server.Sessions() {
		if id := s.ID(); id != "" {
			out[id] = s
		}
	}
	return out
}

// prune forgets sessions go-sdk has closed. Called with v.mu held.
func (v *Sessions) prune(live map[string]*mcp.ServerSession) {
	for id := range v.m {
		if live[id] == nil {
			delete(v.m, id)
		}
	}
}

// Begin marks a request of session id as started (stream: a GET stream)
// and returns the function that marks it done. Unknown ids are left to
// go-sdk, which answers 404.
func (v *Sessions) Begin(id string, stream bool) (done func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
	if s == nil {
		// A session whose first request arrived before [Sessions.Added] ran.
		v.mu.Unlock()
		_, ok := v.live()[id]
		v.mu.Lock()
		if !ok {
			return func() {}
		}
		if s = v.m[id]; s == nil {
			s = &sessState{}
			v.m[id] = s
		}
	}
	s.lastUsed = time.Now()
	if stream {
		s.streams++
	} else {
		s.inflight++
	}
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		s.lastUsed = time.Now()
		if stream {
			s.streams--
		} else {
			s.inflight--
		}
	}
}

// Admit makes room for one more session of the key: over the cap it closes
// the session idle longest. It returns false when every session is busy.
// Called with v.initMu held.
func (v *Sessions) Admit(max int) bool {
	live := v.live()
	v.mu.Lock()
	v.prune(live)
	var victims []*mcp.ServerSession
	for n := len(live); n >= max; n-- {
		id := ""
		for sid, s := range v.m {
			if s.inflight == 0 && (id == "" || s.lastUsed.Before(v.m[id].lastUsed)) {
				id = sid
			}
		}
		if id == "" {
			v.mu.Unlock()
			return false
		}
		delete(v.m, id)
		victims = append(victims, live[id])
	}
	v.mu.Unlock()
	for _, s := range victims {
		v.era.log.Info("mcp session closed: the key is at its session cap", "key", v.key.ID, "session", s.ID(), "cap", max)
		s.Close()
	}
	return true
}

// Added records a session go-sdk has just made.
func (v *Sessions) Added(id string, tasks bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m[id] == nil {
		v.m[id] = &sessState{lastUsed: time.Now()}
	}
	v.m[id].tasks = tasks
}

// declaredTasks reports whether session id's client declared the tasks
// capability.
func (v *Sessions) declaredTasks(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
	return s != nil && s.tasks
}

// TrackEarly notes a tool call of session id answered before go-sdk, so
// that the client's notifications/cancelled for request rid reaches it;
// ok is false when the gateway does not know the session (yet): then
// go-sdk serves the call.
func (v *Sessions) TrackEarly(id string, rid jsonrpc.ID, cancel context.CancelFunc) (forget func(), ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.m[id]
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
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(s.early, rid)
	}, true
}

// CancelEarly passes a session's notifications/cancelled (req) to the
// call answered before go-sdk that it names, if any. go-sdk gets the
// notification too, and ignores an id it does not serve.
func (v *Sessions) CancelEarly(id string, req *wire.Request) {
	if req.Method != "notifications/cancelled" || len(req.RequestID) == 0 {
		return
	}
	v.mu.Lock()
	s := v.m[id]
	none := s == nil || len(s.early) == 0
	v.mu.Unlock()
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
	v.mu.Lock()
	cancel := s.early[rid]
	v.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Count returns how many sessions the key has open.
func (v *Sessions) Count() int { return len(v.live()) }

// CloseIdle closes the view's sessions that have had no request, and no
// GET stream, for longer than idle.
func (v *Sessions) CloseIdle(idle time.Duration) {
	live := v.live()
	v.mu.Lock()
	v.prune(live)
	var idlers []*mcp.ServerSession
	for id, s := range v.m {
		if s.inflight == 0 && s.streams == 0 && time.Since(s.lastUsed) > idle {
			delete(v.m, id)
			idlers = append(idlers, live[id])
		}
	}
	v.mu.Unlock()
	for _, s := range idlers {
		v.era.log.Info("mcp session closed: idle", "key", v.key.ID, "session", s.ID(), "idle", idle)
		s.Close()
	}
}

// Ping sends one keepalive Ping to each of the view's sessions that a Ping
// can reach, and closes those that missed missesToClose in a row.
func (v *Sessions) Ping(interval time.Duration) {
	live := v.live()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.prune(live)
	for id, s := range v.m {
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
			v.mu.Lock()
			s.pinging = false
			if err == nil {
				s.misses = 0
				v.mu.Unlock()
				return
			}
			s.misses++
			closeIt := s.misses >= missesToClose
			v.mu.Unlock()
			if closeIt {
				v.era.log.Info("mcp session closed: it missed keepalive pings", "key", v.key.ID, "session", ss.ID(), "misses", missesToClose, "err", err)
				ss.Close()
			}
		}(live[id], s)
	}
}

// NoteSession is the receiving middleware that keeps what the early path
// needs of a session and go-sdk does not export: the log level its client
// set.
func (v *Sessions) NoteSession(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "logging/setLevel" || err != nil {
			return res, err
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		//lint:ignore SA1019 deprecated in 2026-07-28 (SEP-2577), still in every 2025 version served here
		p, ok2 := req.GetParams().(*mcp.SetLoggingLevelParams)
		if !ok || !ok2 || p == nil || ss.ID() == "" {
			return res, err
		}
		v.mu.Lock()
		if s := v.m[ss.ID()]; s != nil {
			s.logLevel = string(p.Level)
		}
		v.mu.Unlock()
		return res, err
	}
}

// LogLevel returns the log level the client of session id set, "" for none.
func (v *Sessions) LogLevel(id string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.m[id]; s != nil {
		return s.logLevel
	}
	return ""
}
