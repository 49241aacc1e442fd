package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/route"
)

// bridgedAgents carries a project's interceptor requests to its bridged
// agents, for the entries of its policy that name one
// ([interceptors.Agents]): a call of kind request
// ([agentproto.KindRequest]) delivered over the registry's route to one
// replica of the agent, here or on another gateway, as any call is.
type bridgedAgents struct {
	reg       *agents.Registry
	projectID int64
}

var _ interceptors.Agents = bridgedAgents{}

// Bridged returns the project's way to its Bridged agents.
func (f *Pipeline) Bridged(projectID int64) interceptors.Agents {
	return bridgedAgents{reg: f.reg, projectID: projectID}
}

// replicas returns the connected, enabled replicas of the bridged agent
// named name, and whether an agent of that name connected that is not a
// bridge.
func (b bridgedAgents) replicas(name string) (reps []*agents.Replica, plain bool) {
	for _, r := range b.reg.Replicas(b.projectID) {
		switch {
		case r.Reg == nil || r.Reg.Name != name || r.Disabled():
		case r.Reg.Bridge == nil:
			plain = true
		default:
			reps = append(reps, r)
		}
	}
	return reps, plain
}

// Connection is the agent's replica ids: they change when its bridge
// connects again (a new generation after the server's lists changed, or
// a restarted server), and the chain lists the interceptors again then.
func (b bridgedAgents) Connection(name string) string {
	reps, _ := b.replicas(name)
	ids := make([]string, len(reps))
	for i, r := range reps {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// Request delivers method to a replica of the bridged agent named name
// within ctx's deadline (the interceptor's timeout).
func (b bridgedAgents) Request(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error) {
	if reps, plain := b.replicas(name); len(reps) == 0 {
		if plain {
			return nil, interceptors.ErrNotBridged
		}
		return nil, interceptors.ErrNotConnected
	}
	wait := interceptors.MaxWait
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Millisecond)
	}
	target := func(*agents.Snapshot) ([]*agents.Replica, time.Time, bool) {
		reps, _ := b.replicas(name)
		return reps, time.Time{}, true
	}
	res := route.Deliver(ctx, b.reg, b.projectID, target, route.Request{
		Kind: agentproto.KindRequest, Name: method, Exposed: name, Args: params, Wait: wait,
	})
	switch res.Outcome {
	case route.OK:
		return res.Result, nil
	case route.ToolError:
		if res.Code != 0 {
			return nil, &jsonrpc.Error{Code: int64(res.Code), Message: res.Detail, Data: res.Data}
		}
		return nil, errors.New(res.Detail)
	case route.TimedOut:
		return nil, fmt.Errorf("%s: %w", res.Detail, context.DeadlineExceeded)
	case route.Cancelled:
		return nil, ctx.Err()
	case route.NoReplica, route.NotFound, route.Disconnected:
		return nil, fmt.Errorf("%w (%s)", interceptors.ErrNotConnected, res.Outcome)
	}
	return nil, fmt.Errorf("the agent's answer to %s could not be read (%s)", method, res.Outcome)
}
