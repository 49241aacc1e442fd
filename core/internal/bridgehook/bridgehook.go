// Package bridgehook hands what only the gateway's bridge sets on an agent
// from package core/bridging to package core, which registers it, so that
// [core.Options] carries nothing a provider would never set. Package core
// fills in [New] when it is initialised; core/bridging calls it.
package bridgehook

import (
	"context"
	"encoding/json"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// Config is what a bridged agent has beyond core.Options.
type Config struct {
	// Bridge is the registration's description of the MCP server the
	// agent stands for; nil means an ordinary agent.
	Bridge *agentproto.Bridge
	// Request sends a custom MCP request of the gateway's
	// (agentproto.KindRequest) to the server; nil refuses them.
	Request func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// New is core.New with c: opts is a core.Options, and the result a
// *core.Agent. Package core sets it in its init function.
var New func(opts any, c Config) (any, error)
