package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/tasks"
)

// subjTasks is where a gateway hears the signals (cancel, answer) for the
// MCP tasks it runs.
func subjTasks(gw string) string { return "spacefix.gw." + gw + ".tasks" }

// TaskSignals carries the signals of MCP tasks between the gateways: a
// cancel or an answer made on one gateway reaches the gateway that runs
// the task.
func (c *Cluster) TaskSignals() tasks.Signals { return taskSignals{c} }

type taskSignals struct{ c *Cluster }

// Send implements [tasks.Signals]. An answer may be large: it goes in
// parts when it must.
func (s taskSignals) Send(ctx context.Context, gateway string, sig tasks.Signal) error {
	b, err := json.Marshal(sig)
	if err != nil {
		return fmt.Errorf("encode a task signal: %w", err)
	}
	return s.c.send(subjTasks(gateway), "", b)
}

// Receive implements [tasks.Signals].
func (s taskSignals) Receive(fn func(tasks.Signal)) (func(), error) {
	subj := subjTasks(s.c.opts.Gateway)
	sub, err := s.c.nc.Subscribe(subj, s.c.guard(subj, s.c.assemble(func(m *nats.Msg) {
		var sig tasks.Signal
		if err := json.Unmarshal(m.Data, &sig); err != nil {
			s.c.log.Warn("a task signal that does not read", "err", err)
			return
		}
		fn(sig)
	})))
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subj, err)
	}
	return func() { sub.Unsubscribe() }, nil
}
