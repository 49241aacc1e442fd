package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/recovery"
)

// callMsg asks the holder of a replica to deliver a call to it.
type callMsg struct {
	Rep string              `json:"rep"`
	Msg *agentproto.Message `json:"msg"`
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
	b, err := json.Marshal(callMsg{Rep: rc.rep, Msg: m})
	if err == nil {
		err = c.send(subjCall(rc.gw), subjReply(c.opts.Gateway)+"."+token, b)
	}
	if err != nil {
		rc.forget(m.ID)
		return nil, agents.ErrDisconnected
	}
	return p, nil
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
		call.p.Result <- agents.Reply{Result: f.Result, Err: f.Err, Disconnected: f.Disconn}
	}
}

// relay is a call this gateway serves for another over the bus.
type relay struct {
	rep    *agents.Replica
	id     string
	stop   chan struct{}
	once   sync.Once
	reason string // why it was cancelled; set before stop closes
}

func (r *relay) end(reason string) {
	r.once.Do(func() {
		r.reason = reason
		close(r.stop)
	})
}

// onCall delivers a call another gateway sent to a replica this one holds,
// and sends its progress, questions and result back frame by frame.
func (c *Cluster) onCall(m *nats.Msg) {
	var msg callMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Msg == nil || m.Reply == "" {
		return
	}
	reply := func(f frame) {
		b, _ := json.Marshal(f)
		if err := c.send(m.Reply, "", b); err != nil && f.Kind == "result" {
			c.log.Warn("send a result back over the bus", "err", err)
		}
	}
	c.mu.Lock()
	rep := c.local[msg.Rep]
	c.mu.Unlock()
	if rep == nil {
		reply(frame{Kind: "result", Disconn: true})
		return
	}
	// The relay is known before the call goes out, so a cancel that
	// arrives meanwhile is not lost; the call goes out on a goroutine of
	// its own, so an agent that does not read (its socket full) holds up
	// its own calls only, not every call the bus brings this gateway.
	r := &relay{rep: rep, id: msg.Msg.ID, stop: make(chan struct{})}
	key := rep.ID + "/" + r.id
	c.mu.Lock()
	c.relays[key] = r
	c.mu.Unlock()
	rep.Begin() // least-in-flight here counts the calls of every gateway
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer rep.End()
		defer func() {
			c.mu.Lock()
			delete(c.relays, key)
			c.mu.Unlock()
		}()
		p, err := rep.Conn.Start(context.Background(), msg.Msg)
		if err != nil {
			reply(frame{Kind: "result", Disconn: true})
			return
		}
		select {
		case <-r.stop: // cancelled while it went out
			rep.Conn.Cancel(r.id, r.reason)
			return
		default:
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
			case ev := <-p.Events:
				event(ev)
			case q := <-p.Confirm:
				drain()
				reply(frame{Kind: "confirm", Msg: q})
			case res := <-p.Result:
				drain()
				reply(frame{Kind: "result", Result: res.Result, Err: res.Err, Disconn: res.Disconnected, Busy: rep.Inflight() - 1})
				return
			case <-r.stop:
				return // cancelled: the agent was told, a late answer is dropped
			case <-c.stop:
				reply(frame{Kind: "result", Disconn: true})
				return
			}
		}
	}()
}

// onCtl applies a cancel, an answer or a close another gateway sent for a
// replica this one holds.
func (c *Cluster) onCtl(m *nats.Msg) {
	var msg ctlMsg
	if json.Unmarshal(m.Data, &msg) != nil {
		return
	}
	c.mu.Lock()
	rep := c.local[msg.Rep]
	r := c.relays[msg.Rep+"/"+msg.ID]
	c.mu.Unlock()
	if rep == nil {
		return
	}
	// Writes to the agent's socket go on goroutines of their own: one
	// agent that does not read must not hold up the bus for the others.
	switch msg.Op {
	case "cancel":
		if r != nil {
			r.end(msg.Reason)
		}
		rep.Conn.Cancel(msg.ID, msg.Reason) // sends off the caller's path
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
