package interceptors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Outcome is what the chain did with one event.
type Outcome struct {
	Blocked bool
	By      string // server/interceptor that blocked
	Message string // for the caller, when Blocked
	Audit   []Finding
	Ran     []Ran
}

// Finding is what an audit-mode interceptor would have done.
type Finding struct {
	By     string
	Effect string // "block" or "rewrite"
	Detail string
}

// Ran is one invocation, for the call log and the metrics.
type Ran struct {
	By       string
	Type     string
	Duration time.Duration
	Err      error
}

// Hooked is what runs on one event of a chain: the interceptors that hook
// it, or the server whose listing failed and so blocks it.
type Hooked struct {
	c            *Chain
	event, phase string
	muts, vals   []hooked
	down         *server
	err          error
}

// Hooked returns what would run on event in phase, or nil when nothing
// would: then the caller need not build the payload (a result is not
// encoded for servers that hook only requests). A server that cannot be
// listed and does not fail open blocks the event (fail closed).
func (c *Chain) Hooked(ctx context.Context, event, phase string) *Hooked {
	if c == nil || len(c.servers) == 0 {
		return nil
	}
	muts, vals, down, err := c.hookedOn(ctx, event, phase)
	if err == nil && len(muts)+len(vals) == 0 {
		return nil
	}
	return &Hooked{c: c, event: event, phase: phase, muts: muts, vals: vals, down: down, err: err}
}

// Run runs the interceptors hooked on event in phase over payload, and
// returns the payload to send on (rewritten by mutators) and the outcome.
// When the outcome is Blocked the payload must not be sent.
func (c *Chain) Run(ctx context.Context, event, phase string, payload json.RawMessage, ic *InvokeContext) (json.RawMessage, Outcome) {
	h := c.Hooked(ctx, event, phase)
	if h == nil {
		return payload, Outcome{}
	}
	return h.Run(ctx, payload, ic)
}

// Run runs the event's interceptors over payload: see [Chain.Run].
func (hk *Hooked) Run(ctx context.Context, payload json.RawMessage, ic *InvokeContext) (json.RawMessage, Outcome) {
	var out Outcome
	c, event, phase, vals := hk.c, hk.event, hk.phase, hk.vals
	if hk.err != nil {
		c.opts.Log.Warn("interceptor server not reachable; the event was refused", "server", hk.down.label, "event", event, "err", hk.err)
		out.Blocked, out.By = true, hk.down.label
		out.Message = unreachableMessage(hk.down, hk.err)
		return nil, out
	}
	for _, h := range hk.muts {
		res, ran := c.invoke(ctx, h, event, phase, payload, ic)
		out.Ran = append(out.Ran, ran)
		if ran.Err != nil {
			if h.failOpen || h.audit {
				continue
			}
			out.Blocked, out.By, out.Message = true, h.name(), failedMessage(h, ran.Err)
			return nil, out
		}
		next, changed := res.mutated()
		if !changed {
			continue
		}
		if !json.Valid(next) {
			if h.failOpen || h.audit {
				continue
			}
			out.Blocked, out.By, out.Message = true, h.name(), failedMessage(h, fmt.Errorf("it answered a payload that is not JSON"))
			return nil, out
		}
		if h.audit {
			out.Audit = append(out.Audit, Finding{By: h.name(), Effect: "rewrite"})
			continue
		}
		payload = next
	}
	verdicts := make([]*InvokeResult, len(vals))
	rans := make([]Ran, len(vals))
	if len(vals) == 1 {
		// One validator runs here: a goroutine of its own would grow its
		// stack anew through go-sdk's client on every event.
		verdicts[0], rans[0] = c.invoke(ctx, vals[0], event, phase, payload, ic)
	} else {
		var wg sync.WaitGroup
		for i, h := range vals {
			wg.Go(func() { verdicts[i], rans[i] = c.invoke(ctx, h, event, phase, payload, ic) })
		}
		wg.Wait()
	}
	out.Ran = append(out.Ran, rans...)
	for i, h := range vals {
		if rans[i].Err != nil {
			if h.failOpen || h.audit {
				continue
			}
			out.Blocked, out.By, out.Message = true, h.name(), failedMessage(h, rans[i].Err)
			return nil, out
		}
		blocks, msgs := verdicts[i].verdict()
		if !blocks {
			continue
		}
		text := joinMessages(msgs)
		if h.audit {
			out.Audit = append(out.Audit, Finding{By: h.name(), Effect: "block", Detail: text})
			continue
		}
		out.Blocked, out.By = true, h.name()
		out.Message = fmt.Sprintf("This call was refused by interceptor %q: %s", h.info.Name, text)
		return nil, out
	}
	return payload, out
}

// invoke calls one interceptor under its timeout.
func (c *Chain) invoke(ctx context.Context, h hooked, event, phase string, payload json.RawMessage, ic *InvokeContext) (*InvokeResult, Ran) {
	timeout := h.s.entry.TimeoutOf()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	p := &InvokeParams{Name: h.info.Name, Event: event, Phase: phase, Payload: payload, TimeoutMs: timeout.Milliseconds(), Context: ic}
	res, err := h.s.conn.invoke(ctx, p)
	ran := Ran{By: h.name(), Type: h.info.Type, Duration: time.Since(start), Err: err}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			ran.Err = fmt.Errorf("%w %v", errNoAnswer, timeout)
		}
		c.opts.Log.Warn("interceptor failed", "interceptor", h.name(), "event", event, "phase", phase, "err", err)
		return nil, ran
	}
	return res, ran
}

// errNoAnswer says an interceptor did not answer within its timeout.
var errNoAnswer = errors.New("no answer within")

// failedMessage is the caller's refusal when an interceptor could not
// run; the detail stays in the gateway's log.
func failedMessage(h hooked, err error) string {
	switch {
	case errors.Is(err, errNoAnswer):
		return fmt.Sprintf("This call was refused: interceptor %q of the project's policy did not answer in time (%v).", h.info.Name, h.s.entry.TimeoutOf())
	case errors.Is(err, ErrNotConnected), errors.Is(err, ErrNotBridged):
		return unreachableMessage(h.s, err)
	}
	return fmt.Sprintf("This call was refused: interceptor %q of the project's policy could not be run.", h.info.Name)
}

// unreachableMessage is the caller's refusal when interceptor server s
// could not be reached (err says why).
func unreachableMessage(s *server, err error) string {
	switch {
	case errors.Is(err, ErrNotConnected):
		return fmt.Sprintf("This call was refused: the interceptor server %q of the project's policy is the bridged agent %q, which is not connected.", s.label, s.entry.Agent)
	case errors.Is(err, ErrNotBridged):
		return fmt.Sprintf("This call was refused: the interceptor server %q of the project's policy is the agent %q, which is not a bridged MCP server; only an agent run by spacefix bridge can serve interceptors.", s.label, s.entry.Agent)
	}
	return fmt.Sprintf("This call was refused: the interceptor server %q of the project's policy could not be reached.", s.label)
}

// joinMessages is a validator's messages as one sentence.
func joinMessages(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		if m.Severity != "" && m.Severity != "error" {
			continue
		}
		s := strings.TrimSpace(m.Message)
		if m.Path != "" {
			s = m.Path + ": " + s
		}
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "the payload was not valid."
	}
	s := strings.Join(parts, "; ")
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "…"
	}
	return s
}

// maxMessage bounds what a validator's messages add to a refusal.
const maxMessage = 1000
