package cluster

// Calls carried over the bus: a remoteConn is a mirrored replica as this
// gateway calls it (the call out, frames back on this gateway's reply
// subject, cancels and answers on the holder's ctl subject), and a relay
// is a call this gateway delivers to a replica it holds for another
// gateway, ended at the caller's wait or when the caller goes away.

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/recovery"
)

// callMsg asks the holder of a replica to deliver a call to it.
type callMsg struct {
	Rep  string              `json:"rep"`
	Msg  *agentproto.Message `json:"msg"`
	From string              `json:"from"` // the caller's gateway id
	// WaitMs is how long the caller waits for the result from when it
	// sent the call: the holder ends the relay then (see relayWait).
	WaitMs int64 `json:"waitMs,omitempty"`
}

// ctlMsg is everything else a caller tells the holder about a replica.
type ctlMsg struct {
	Op     string              `json:"op"` // cancel, send, close
	Rep    string              `json:"rep"`
	ID     string              `json:"id,omitempty"` // cancel: the call
	Reason string              `json:"reason,omitempty"`
	Msg    *agentproto.Message `json:"msg,omitempty"` // send
}

// frame is one step of a call served over the bus, holder to caller.
type frame struct {
	Kind    string              `json:"kind"` // progress, confirm (confirm and ask), log, result
	Line    string              `json:"line,omitempty"`
	Msg     *agentproto.Message `json:"msg,omitempty"`
	Result  json.RawMessage     `json:"result,omitempty"`
	Err     string              `json:"err,omitempty"`
	Code    int                 `json:"code,omitempty"` // with err: a protocol error's code and data
	Data    json.RawMessage     `json:"data,omitempty"`
	Disconn bool                `json:"disconnected,omitempty"`
	Busy    int64               `json:"busy,omitempty"` // result: the replica's calls in flight then, from every gateway
}

// remoteConn is a replica held by another gateway, as this one calls it:
// an [agents.Conn] over the bus.
type remoteConn struct {
	c       *Cluster
	gw, rep string

	disabled atomic.Bool                    // the disabled state last heard or told
	entry    atomic.Pointer[agents.Replica] // the registry's entry of the replica

	mu     sync.Mutex
	calls  map[string]string // call id → reply token, while pending
	ended  bool
	reason string
	done   chan struct{}
}

var _ agents.Conn = (*remoteConn)(nil)

func newRemoteConn(c *Cluster, gw, rep string) *remoteConn {
	return &remoteConn{c: c, gw: gw, rep: rep, calls: make(map[string]string), done: make(chan struct{})}
}

// remoteCall is one call this gateway sent over the bus.
type remoteCall struct {
	conn *remoteConn
	id   string
	p    *agents.Pending
}

// Start implements [agents.Conn].
func (rc *remoteConn) Start(ctx context.Context, m *agentproto.Message) (*agents.Pending, error) {
	c := rc.c
	p := agents.NewPending()
	rc.mu.Lock()
	if rc.ended {
		rc.mu.Unlock()
		return nil, agents.ErrDisconnected
	}
	c.mu.Lock()
	c.seq++
	token := strconv.FormatUint(c.seq, 36)
	c.calls[token] = &remoteCall{conn: rc, id: m.ID, p: p}
	c.mu.Unlock()
	rc.calls[m.ID] = token
	rc.mu.Unlock()
	b, err := json.Marshal(callMsg{Rep: rc.rep, Msg: m, From: c.opts.Gateway, WaitMs: waitMs(ctx, m)})
	if err == nil {
		err = c.send(subjCall(rc.gw), subjReply(c.opts.Gateway)+"."+token, b)
	}
	if err != nil {
		rc.forget(m.ID)
		return nil, agents.ErrDisconnected
	}
	return p, nil
}

// waitMs returns how long the caller waits for call m from now, in
// milliseconds (at least 1): until the earlier of its deadline and ctx's.
func waitMs(ctx context.Context, m *agentproto.Message) int64 {
	var until time.Time
	if m.Deadline > 0 {
		until = time.UnixMilli(m.Deadline)
	}
	if d, ok := ctx.Deadline(); ok && (until.IsZero() || d.Before(until)) {
		until = d
	}
	if until.IsZero() {
		return 0
	}
	return max(1, time.Until(until).Milliseconds())
}

// forget drops a call's bookkeeping; a late frame for it is dropped.
func (rc *remoteConn) forget(id string) {
	rc.mu.Lock()
	token, ok := rc.calls[id]
	delete(rc.calls, id)
	rc.mu.Unlock()
	if ok {
		rc.c.mu.Lock()
		delete(rc.c.calls, token)
		rc.c.mu.Unlock()
	}
}

// Cancel implements [agents.Conn].
func (rc *remoteConn) Cancel(id, reason string) {
	rc.forget(id)
	rc.c.publish(subjCtl(rc.gw), ctlMsg{Op: "cancel", Rep: rc.rep, ID: id, Reason: reason})
}

// Send implements [agents.Conn].
func (rc *remoteConn) Send(_ context.Context, m *agentproto.Message) error {
	rc.mu.Lock()
	ended := rc.ended
	rc.mu.Unlock()
	if ended {
		return agents.ErrDisconnected
	}
	rc.c.publish(subjCtl(rc.gw), ctlMsg{Op: "send", Rep: rc.rep, Msg: m})
	return nil
}

// Close implements [agents.Conn]: the holder ends the agent's connection
// (a revoked key, say), and its announcement takes the replica out.
func (rc *remoteConn) Close(reason string) {
	rc.c.publish(subjCtl(rc.gw), ctlMsg{Op: "close", Rep: rc.rep, Reason: reason})
}

// replica returns the registry's entry this connection carries calls of.
func (rc *remoteConn) replica() *agents.Replica { return rc.entry.Load() }

// Done implements [agents.Conn].
func (rc *remoteConn) Done() <-chan struct{} { return rc.done }

// end fails the calls in flight as disconnected and ends the connection
// here: the holder said the replica left, or the holder went away.
func (rc *remoteConn) end(reason string) {
	rc.mu.Lock()
	if rc.ended {
		rc.mu.Unlock()
		return
	}
	rc.ended, rc.reason = true, reason
	calls := rc.calls
	rc.calls = nil
	rc.mu.Unlock()
	c := rc.c
	for _, token := range calls {
		c.mu.Lock()
		call := c.calls[token]
		delete(c.calls, token)
		c.mu.Unlock()
		if call != nil {
			call.p.Result <- agents.Reply{Disconnected: true}
		}
	}
	close(rc.done)
}

// onReply takes a frame of a call this gateway sent.
func (c *Cluster) onReply(m *nats.Msg) {
	token := m.Subject[len(subjReply(c.opts.Gateway))+1:]
	var f frame
	if json.Unmarshal(m.Data, &f) != nil {
		return
	}
	c.mu.Lock()
	call := c.calls[token]
	if call != nil && f.Kind == "result" {
		delete(c.calls, token)
	}
	c.mu.Unlock()
	if call == nil {
		return // cancelled, or its connection ended: dropped
	}
	switch f.Kind {
	case "progress":
		select {
		case call.p.Events <- agents.Event{Line: f.Line}:
		default: // full: the caller's throttle keeps the latest
		}
	case "confirm":
		if f.Msg != nil {
			select {
			case call.p.Confirm <- f.Msg:
			default:
			}
		}
	case "log":
		if f.Msg != nil {
			select {
			case call.p.Events <- agents.Event{Log: f.Msg}:
			default: // a flood: dropped, as on the holder
			}
		}
	case "result":
		rc := call.conn
		if rep := rc.replica(); rep != nil {
			rep.Report(f.Busy)
		}
		rc.mu.Lock()
		if rc.calls != nil {
			delete(rc.calls, call.id)
		}
		rc.mu.Unlock()
		call.p.Result <- agents.Reply{Result: f.Result, Err: f.Err, Code: f.Code, Data: f.Data, Disconnected: f.Disconn}
	}
}

// relay is a call this gateway serves for another over the bus. It ends at
// the call's deadline (and a little after, relayGrace) whatever the bus
// brings: a cancel lost on the bus (core NATS delivers at most once) or a
// caller that went away must not leave it, and its count in the replica's
// calls in flight, behind for good.
type relay struct {
	rep    *agents.Replica
	id     string
	from   string // the gateway that sent the call
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// endedEarly is the cause of a relay's end before its deadline: the
// reason the agent is told.
type endedEarly string

func (e endedEarly) Error() string { return "relay ended: " + string(e) }

// end ends the relay early: the agent is told reason.
func (r *relay) end(reason string) { r.cancel(endedEarly(reason)) }

// why returns the reason the agent is told once r.ctx is done, and
// whether the relay was ended early (rather than at its deadline).
func (r *relay) why() (reason string, early bool) {
	var e endedEarly
	if errors.As(context.Cause(r.ctx), &e) {
		return string(e), true
	}
	return agentproto.ReasonTimeout, false
}

// Bounds of a relay: the caller gives up at the call's deadline and sends
// a cancel; a relay that heard none ends relayGrace later by itself. A call
// that says no wait is bounded by maxRelayWait.
const (
	relayGrace   = time.Second
	maxRelayWait = 10 * time.Minute
)

// relayWait returns how long a call another gateway sent may be relayed.
// The caller says how long it waits, relative to when it sent the call, so
// that gateways whose clocks differ agree.
func relayWait(msg *callMsg) time.Duration {
	var wait time.Duration
	switch {
	case msg.WaitMs > 0:
		wait = time.Duration(msg.WaitMs) * time.Millisecond
	case msg.Msg.Deadline > 0:
		wait = time.Until(time.UnixMilli(msg.Msg.Deadline))
	default:
		wait = maxRelayWait
	}
	return min(max(wait, 0), maxRelayWait) + relayGrace
}

// callerOf returns the id of the gateway a reply subject belongs to.
func callerOf(reply string) string {
	gw, ok := strings.CutPrefix(reply, "spacefix.reply.")
	if !ok {
		return ""
	}
	gw, _, _ = strings.Cut(gw, ".")
	return gw
}

// onCall delivers a call another gateway sent to a replica this one holds,
// and sends its progress, questions and result back frame by frame.
func (c *Cluster) onCall(m *nats.Msg) {
	msg := new(callMsg)
	if json.Unmarshal(m.Data, msg) != nil || msg.Msg == nil || m.Reply == "" {
		return
	}
	reply := func(f frame) {
		b, _ := json.Marshal(f)
		if err := c.send(m.Reply, "", b); err != nil && f.Kind == "result" {
			c.log.Warn("send a result back over the bus", "err", err)
		}
	}
	from := msg.From
	if from == "" {
		from = callerOf(m.Reply)
	}
	key := msg.Rep + "/" + msg.Msg.ID
	// The relay is known before the call goes out, so a cancel that
	// arrives meanwhile is not lost; one that arrived before the call (it
	// travels on another subject) refuses it. The WaitGroup is added to
	// under c.mu while the cluster is open, so Close, which marks it
	// closed under c.mu and then waits, never waits while one is added.
	c.mu.Lock()
	rep := c.local[msg.Rep]
	if c.closed || rep == nil {
		c.mu.Unlock()
		reply(frame{Kind: "result", Disconn: true})
		return
	}
	if c.cancelled.take(key, time.Now()) {
		c.mu.Unlock()
		c.log.Debug("a call relayed for another gateway was cancelled before it arrived; not delivered", "peer", from, "replica", msg.Rep, "call", msg.Msg.ID)
		return
	}
	bounded, stop := context.WithTimeout(context.Background(), relayWait(msg))
	ctx, cancel := context.WithCancelCause(bounded)
	r := &relay{rep: rep, id: msg.Msg.ID, from: from, ctx: ctx, cancel: cancel}
	c.relays[key] = r
	c.wg.Add(1)
	c.mu.Unlock()
	rep.Begin() // least-in-flight here counts the calls of every gateway
	// The call goes out on a goroutine of its own, so an agent that does
	// not read (its socket full) holds up its own calls only, not every
	// call the bus brings this gateway.
	go func() {
		defer c.wg.Done()
		defer rep.End()
		defer func() {
			c.mu.Lock()
			if c.relays[key] == r {
				delete(c.relays, key)
			}
			c.mu.Unlock()
			cancel(nil)
			stop()
		}()
		c.relay(r, msg.Msg, reply)
	}()
}

// relay serves one call for another gateway until its result, its end
// (cancelled, its deadline, its caller gone) or Close.
func (c *Cluster) relay(r *relay, m *agentproto.Message, reply func(frame)) {
	rep := r.rep
	p, err := rep.Conn.Start(r.ctx, m)
	if err != nil {
		reply(frame{Kind: "result", Disconn: true})
		return
	}
	// event forwards a progress line or log message; drain forwards
	// those that came before a question or the result, which go first.
	event := func(ev agents.Event) {
		if ev.Log != nil {
			reply(frame{Kind: "log", Msg: ev.Log})
		} else {
			reply(frame{Kind: "progress", Line: ev.Line})
		}
	}
	drain := func() {
		for {
			select {
			case ev := <-p.Events:
				event(ev)
			default:
				return
			}
		}
	}
	for {
		select {
		case <-r.ctx.Done():
			// Cancelled, or its deadline passed with no cancel heard: the
			// agent is told, a late answer is dropped.
			reason, early := r.why()
			if !early {
				c.log.Debug("a call relayed for another gateway outlived its deadline with no cancel heard; ended", "peer", r.from, "replica", rep.ID, "call", r.id)
			}
			rep.Conn.Cancel(r.id, reason)
			return
		case ev := <-p.Events:
			event(ev)
		case q := <-p.Confirm:
			drain()
			reply(frame{Kind: "confirm", Msg: q})
		case res := <-p.Result:
			drain()
			reply(frame{Kind: "result", Result: res.Result, Err: res.Err, Code: res.Code, Data: res.Data, Disconn: res.Disconnected, Busy: rep.Inflight() - 1})
			return
		case <-c.stop:
			reply(frame{Kind: "result", Disconn: true})
			return
		}
	}
}

// endRelays ends the calls this gateway relays for a gateway that went
// away: nobody waits for their results any more.
func (c *Cluster) endRelays(gw string) {
	c.mu.Lock()
	var rs []*relay
	for _, r := range c.relays {
		if r.from == gw {
			rs = append(rs, r)
		}
	}
	c.mu.Unlock()
	for _, r := range rs {
		r.end(agentproto.ReasonCancelled)
	}
}

// onCtl applies a cancel, an answer or a close another gateway sent for a
// replica this one holds.
func (c *Cluster) onCtl(m *nats.Msg) {
	var msg ctlMsg
	if json.Unmarshal(m.Data, &msg) != nil {
		return
	}
	if msg.Op == "cancel" {
		// The relay tells the agent. A cancel that finds no relay may have
		// overtaken its call (they travel on separate subjects): it is
		// remembered for a while, and the call is refused when it comes.
		key := msg.Rep + "/" + msg.ID
		c.mu.Lock()
		r := c.relays[key]
		if r == nil {
			c.cancelled.add(key, time.Now())
		}
		c.mu.Unlock()
		if r != nil {
			r.end(msg.Reason)
		}
		return
	}
	c.mu.Lock()
	rep := c.local[msg.Rep]
	c.mu.Unlock()
	if rep == nil {
		return
	}
	// Writes to the agent's socket go on goroutines of their own: one
	// agent that does not read must not hold up the bus for the others.
	switch msg.Op {
	case "send":
		if msg.Msg != nil {
			recovery.Go(c.log, "answer an agent's question for another gateway", func() {
				rep.Conn.Send(context.Background(), msg.Msg)
			})
		}
	case "close":
		recovery.Go(c.log, "close an agent's connection for another gateway", func() {
			rep.Conn.Close(msg.Reason)
		})
	}
}
