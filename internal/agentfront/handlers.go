package agentfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// Register checks a registration and answers with a ticket to connect
// with, or with the plain-text reason it is refused (docs/agent-protocol.md,
// section 1.1). Mount it at POST [agentproto.RegisterPath].
func (f *Front) Register(w http.ResponseWriter, r *http.Request) {
	key, ok := f.agentKey(w, r)
	if !ok {
		return
	}
	project, err := f.opts.Store.ProjectByID(r.Context(), key.ProjectID)
	if err != nil {
		f.log.Error("load project for agent", "key", key.ID, "err", err)
		http.Error(w, "The gateway could not load the key's project; try again.", http.StatusServiceUnavailable)
		return
	}
	lim := LimitsOf(project.Settings)
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(lim.MaxRegister)+1))
	if err != nil {
		http.Error(w, "Could not read the registration: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > lim.MaxRegister {
		n := len(body)
		if r.ContentLength > 0 {
			n = int(r.ContentLength)
		}
		msg := fmt.Sprintf("Registration is %s bytes; the limit is %s bytes.", agentproto.Thousands(n), agentproto.Thousands(lim.MaxRegister))
		if r.ContentLength <= 0 {
			msg = fmt.Sprintf("Registration is over %s bytes, the limit.", agentproto.Thousands(lim.MaxRegister))
		}
		http.Error(w, msg, http.StatusRequestEntityTooLarge)
		return
	}
	reg := new(agentproto.Registration)
	if err := json.Unmarshal(body, reg); err != nil {
		http.Error(w, "Registration is not valid JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	schemas, err := Check(reg, lim)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tk, err := f.tickets.issue(key.ID, reg, schemas)
	if err != nil {
		f.log.Info("agent registration refused: too many tickets waiting", "key", key.ID, "limit", MaxTicketsPerKey)
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: tk, ExpiresInMs: int(f.tickets.ttl.Milliseconds())})
}

// Connect upgrades a registered agent to its WebSocket and serves it until
// the connection ends. Mount it at GET [agentproto.ConnectPath], outside any
// per-request deadline: the connection is hijacked and lives long.
func (f *Front) Connect(w http.ResponseWriter, r *http.Request) {
	key, ok := f.agentKey(w, r)
	if !ok {
		return
	}
	ticketID := r.URL.Query().Get("ticket")
	t, ok := f.tickets.redeem(ticketID, key.ID)
	var elsewhere *agentproto.Registration
	if !ok && f.opts.Redeem != nil && ticketID != "" {
		elsewhere, ok = f.opts.Redeem(r.Context(), ticketID, key.ID)
	}
	if !ok {
		http.Error(w, "Unknown or expired ticket: register again with POST "+agentproto.RegisterPath+".", http.StatusUnauthorized)
		return
	}
	project, err := f.opts.Store.ProjectByID(r.Context(), key.ProjectID)
	if err != nil {
		http.Error(w, "The gateway could not load the key's project; try again.", http.StatusServiceUnavailable)
		return
	}
	if elsewhere != nil {
		// Registered on another gateway, which checked it; the schemas
		// are compiled here.
		schemas, err := Check(elsewhere, LimitsOf(project.Settings))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		t = &ticket{keyID: key.ID, reg: elsewhere, schemas: schemas}
	}
	rep := &agents.Replica{
		ID: "r-" + rand.Text()[:10], ProjectID: key.ProjectID, AgentKey: key.ID,
		Instance: t.reg.Instance, Since: time.Now(), Reg: t.reg,
	}
	log := f.log.With("replica", rep.ID, "agent", key.ID)
	tr := newWSTransport(log)
	ws, err := websocket.Accept(smallBuffers(w, &tr.nc), r, &websocket.AcceptOptions{
		CompressionMode: websocket.CompressionDisabled,
		OnPingReceived:  func(context.Context, []byte) bool { tr.heard(); return true },
		OnPongReceived:  func(context.Context, []byte) { tr.heard() },
	})
	if err != nil {
		return // Accept has answered the client
	}
	tr.accepted(ws)
	if !f.track() {
		ws.Close(websocket.StatusGoingAway, "gateway shutting down")
		return
	}
	// The connection is hijacked: it is served on a goroutine of its own
	// and this handler returns, so that neither the request nor the deep
	// stack of the HTTP server's goroutine is kept for the connection's
	// life (at 10,000 agents, about 8 KiB of stack and 3 KiB of request
	// each).
	recovery.Go(f.log, "serve an agent", func() {
		defer f.conns.Done()
		f.run(tr, rep, project, t.schemas, key.ID)
	})
}

// maxUpdatesPerMinute caps the resource_updated messages of one replica:
// each reaches every subscribed session of the project.
const maxUpdatesPerMinute = 600

// run welcomes a replica, puts it in the registry and serves its
// connection until it ends.
func (f *Front) run(tr *wsTransport, rep *agents.Replica, project store.Project, schemas map[string]*schema.Schema, keyID string) {
	ctx, reg := f.ctx, f.opts.Registry
	log := tr.log
	conn := route.NewConn(tr, log, route.Events{
		SetEnabled: func(kind, name string, on bool) error { return reg.SetEnabledKind(rep, kind, name, on) },
		ResourceUpdated: func(uri string) error {
			if ok, _ := f.updates.Allow(rep.ID, maxUpdatesPerMinute); !ok {
				return fmt.Errorf("more than %d resource updates a minute; this one is dropped", maxUpdatesPerMinute)
			}
			return reg.ResourceUpdated(rep, uri)
		},
		Drain: func() {
			log.Info("agent draining")
			reg.Remove(rep)
		},
	})
	rep.Conn = conn
	// The welcome goes first: once the replica is in the registry, calls
	// (some may be waiting for it) can go out at once.
	err := conn.Send(ctx, &agentproto.Message{Type: agentproto.TypeWelcome, Welcome: &agentproto.Welcome{
		Protocol: agentproto.Version, Replica: rep.ID, Project: project.Name, Agent: keyID,
		CallWaitMs: int(project.Settings.CallWait().Milliseconds()), HeartbeatMs: int(f.opts.Heartbeat.Milliseconds()),
	}})
	if err == nil {
		reg.Add(rep, schemas)
		defer reg.Remove(rep) // also when something below panics
		log.Info("agent connected", "project", project.Name,
			"instance", rep.Instance, "tools", len(rep.Reg.Tools), "sdk", rep.Reg.SDK)
		err = f.serve(conn, tr)
		reg.Remove(rep)
	}
	tr.Close("")
	tr.wait() // the writer ends with the connection
	log.Info("agent disconnected", "reason", closeReason(err))
}

// serve runs the connection, watched by the watchdog, until it ends.
func (f *Front) serve(conn *route.Conn, tr *wsTransport) error {
	f.watch(tr)
	defer f.unwatch(tr)
	return conn.Serve(f.ctx)
}

// agentKey checks the request's agent key, answering 401/403 itself.
func (f *Front) agentKey(w http.ResponseWriter, r *http.Request) (store.Key, bool) {
	k, err := f.opts.Verifier.Verify(r.Context(), auth.BearerToken(r.Header.Get("Authorization")))
	switch {
	case errors.Is(err, auth.ErrUnknownKey):
		http.Error(w, "Unknown or revoked agent key. Create one with: spacefix keys create --kind agent", http.StatusUnauthorized)
		return k, false
	case err != nil:
		f.log.Error("verify agent key", "err", err)
		http.Error(w, "The gateway could not check the key; try again.", http.StatusServiceUnavailable)
		return k, false
	case k.Kind != store.KindAgent:
		http.Error(w, "This is a client key. Agents connect with an agent key: spacefix keys create --kind agent", http.StatusForbidden)
		return k, false
	}
	return k, true
}
