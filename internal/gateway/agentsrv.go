package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/route"
	"github.com/spacefix/spacefix/internal/schema"
	"github.com/spacefix/spacefix/internal/store"
)

// handleRegister checks a registration and answers with a ticket to connect
// with, or with the plain-text reason it is refused (docs/agent-protocol.md,
// section 1.1).
func (g *Gateway) handleRegister(w http.ResponseWriter, r *http.Request) {
	key, ok := g.agentKey(w, r)
	if !ok {
		return
	}
	project, err := g.store.ProjectByID(r.Context(), key.ProjectID)
	if err != nil {
		g.log.Error("load project for agent", "key", key.ID, "err", err)
		http.Error(w, "The gateway could not load the key's project; try again.", http.StatusServiceUnavailable)
		return
	}
	lim := limitsOf(project.Settings)
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
	if msg := reg.Validate(lim); msg != "" {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	schemas := make(map[string]*schema.Schema, len(reg.Tools))
	for _, t := range reg.Tools {
		exp := agents.ExposedName(reg, t.Name)
		if len(exp) > agentproto.MaxNameLen {
			http.Error(w, fmt.Sprintf("Tool name %q becomes %q with the namespace, longer than %d characters. Shorten the agent or tool name.", t.Name, exp, agentproto.MaxNameLen), http.StatusBadRequest)
			return
		}
		if msg := agentproto.CheckReserved("tool", exp); msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		s, err := schema.Compile(t.InputSchema)
		if err != nil {
			http.Error(w, fmt.Sprintf("Input schema of tool %q does not compile: %v", t.Name, err), http.StatusBadRequest)
			return
		}
		schemas[t.Name] = s
	}
	tk := g.tickets.issue(key.ID, reg, schemas)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(agentproto.Ticket{Ticket: tk, ExpiresInMs: int(g.tickets.ttl.Milliseconds())})
}

// handleConnect upgrades a registered agent to its WebSocket and serves it
// until the connection ends.
func (g *Gateway) handleConnect(w http.ResponseWriter, r *http.Request) {
	key, ok := g.agentKey(w, r)
	if !ok {
		return
	}
	t, ok := g.tickets.redeem(r.URL.Query().Get("ticket"), key.ID)
	if !ok {
		http.Error(w, "Unknown or expired ticket: register again with POST "+agentproto.RegisterPath+".", http.StatusUnauthorized)
		return
	}
	project, err := g.store.ProjectByID(r.Context(), key.ProjectID)
	if err != nil {
		http.Error(w, "The gateway could not load the key's project; try again.", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept has answered the client
	}
	if !g.track() {
		ws.Close(websocket.StatusGoingAway, "gateway shutting down")
		return
	}
	defer g.conns.Done()

	rep := &agents.Replica{
		ID: "r-" + rand.Text()[:10], ProjectID: key.ProjectID, AgentKey: key.ID,
		Instance: t.reg.Instance, Since: time.Now(), Reg: t.reg,
	}
	conn := route.NewConn(ws, g.log.With("replica", rep.ID, "agent", key.ID), g.cfg.Heartbeat, route.Events{
		SetEnabled: func(name string, on bool) error { return g.reg.SetEnabled(rep, name, on) },
		Drain: func() {
			g.log.Info("agent draining", "replica", rep.ID, "agent", key.ID)
			g.reg.Remove(rep)
		},
	})
	rep.Conn = conn
	// The welcome goes first: once the replica is in the registry, calls
	// (some may be waiting for it) can go out at once.
	err = conn.Send(g.ctx, &agentproto.Message{Type: agentproto.TypeWelcome, Welcome: &agentproto.Welcome{
		Protocol: agentproto.Version, Replica: rep.ID, Project: project.Name, Agent: key.ID,
		CallWaitMs: int(project.Settings.CallWait().Milliseconds()), HeartbeatMs: int(g.cfg.Heartbeat.Milliseconds()),
	}})
	if err == nil {
		g.reg.Add(rep, t.schemas)
		defer g.reg.Remove(rep) // also when something below panics
		g.log.Info("agent connected", "replica", rep.ID, "agent", key.ID, "project", project.Name,
			"instance", rep.Instance, "tools", len(t.reg.Tools), "sdk", t.reg.SDK)
		err = conn.Serve(g.ctx)
		g.reg.Remove(rep)
	}
	g.log.Info("agent disconnected", "replica", rep.ID, "agent", key.ID, "reason", closeReason(err))
}

// agentKey checks the request's agent key, answering 401/403 itself.
func (g *Gateway) agentKey(w http.ResponseWriter, r *http.Request) (store.Key, bool) {
	k, err := g.verifier.Verify(r.Context(), auth.BearerToken(r.Header.Get("Authorization")))
	switch {
	case errors.Is(err, auth.ErrUnknownKey):
		http.Error(w, "Unknown or revoked agent key. Create one with: spacefix keys create --kind agent", http.StatusUnauthorized)
		return k, false
	case err != nil:
		g.log.Error("verify agent key", "err", err)
		http.Error(w, "The gateway could not check the key; try again.", http.StatusServiceUnavailable)
		return k, false
	case k.Kind != store.KindAgent:
		http.Error(w, "This is a client key. Agents connect with an agent key: spacefix keys create --kind agent", http.StatusForbidden)
		return k, false
	}
	return k, true
}

func limitsOf(s store.ProjectSettings) agentproto.Limits {
	lim := agentproto.DefaultLimits()
	if s.MaxTools > 0 {
		lim.MaxTools = s.MaxTools
	}
	if s.MaxSchemaBytes > 0 {
		lim.MaxSchema = s.MaxSchemaBytes
	}
	if s.MaxResources > 0 {
		lim.MaxResources = s.MaxResources
	}
	if s.MaxRegistrationBytes > 0 {
		lim.MaxRegister = s.MaxRegistrationBytes
	}
	return lim
}

// closeReason says in words how an agent's connection ended, for the log.
func closeReason(err error) string {
	switch {
	case err == nil:
		return "closed"
	case errors.Is(err, route.ErrGoodbye):
		return err.Error()
	case errors.Is(err, context.Canceled):
		return "gateway shutting down"
	}
	switch websocket.CloseStatus(err) {
	case -1:
	case websocket.StatusNormalClosure:
		return "the agent closed the connection"
	case websocket.StatusGoingAway:
		return "the agent is stopping"
	default:
		return fmt.Sprintf("closed by the agent with status %d", websocket.CloseStatus(err))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the connection dropped without a goodbye"
	}
	return "connection lost: " + err.Error()
}

// tickets are registrations accepted and waiting for their WebSocket.
type tickets struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*ticket
}

type ticket struct {
	keyID   string
	reg     *agentproto.Registration
	schemas map[string]*schema.Schema
	expires time.Time
}

func newTickets(ttl time.Duration) *tickets {
	return &tickets{ttl: ttl, m: make(map[string]*ticket)}
}

func (ts *tickets) issue(keyID string, reg *agentproto.Registration, schemas map[string]*schema.Schema) string {
	id := rand.Text()
	now := time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.m { // few at a time: agents redeem within milliseconds
		if now.After(t.expires) {
			delete(ts.m, k)
		}
	}
	ts.m[id] = &ticket{keyID: keyID, reg: reg, schemas: schemas, expires: now.Add(ts.ttl)}
	return id
}

// redeem returns and forgets a live ticket issued to keyID.
func (ts *tickets) redeem(id, keyID string) (*ticket, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil || t.keyID != keyID || time.Now().After(t.expires) {
		return nil, false
	}
	delete(ts.m, id)
	return t, true
}
