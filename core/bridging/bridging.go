// Package bridging is for the Spacefix gateway's own `spacefix bridge`
// only: it makes a [core.Agent] that stands for an existing MCP server,
// whose tool and prompt names carry the server's name and whose
// registration tells the dashboard what it bridges. Providers never need
// it; it is not part of the SDK's API and may change in any release.
package bridging

import (
	"context"
	"encoding/json"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/bridgehook"
)

// Bridge describes the MCP server a bridged agent stands for, as the
// dashboard shows it. None of it may be secret.
type Bridge struct {
	// Transport is "stdio", "streamable-http" or "sse".
	Transport string
	// Target is the command line or the URL, without secrets.
	Target string
	// Server and ServerVersion are the server's name and version from its
	// answer to initialize.
	Server, ServerVersion string
	// Unprefixed registers names as they are, under the ordinary rules,
	// instead of <Name>__<tool>.
	Unprefixed bool
	// PerPerson, when set, says the remote acts as each caller's own
	// account; nil: one shared account.
	PerPerson *PerPerson
	// Request, when set, sends a custom MCP request of the gateway's
	// (agentproto.KindRequest: the interceptors extension's methods, for a
	// project's policy) to the server and returns its result; a
	// [core.ProtocolError] carries the server's JSON-RPC error back. Nil
	// answers every such request with an error. It is not sent to the
	// gateway.
	Request func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// PerPerson says a bridged remote acts as each caller's own upstream
// account: Mode "connect" or "exchange", URL (connect: the remote MCP URL
// people connect to, without userinfo) and Fallback ("shared": calls
// without a person use the bridge's own account; "": refused).
type PerPerson struct {
	Mode, URL, Fallback string
}

// New returns an agent configured by opts that stands for the MCP server
// b, as [core.New] returns an ordinary one. Its tool and prompt names must
// be <opts.Name>__<the server's name> unless b.Unprefixed, so opts.Name is
// required and opts.Namespace must be false.
func New(opts core.Options, b Bridge) (*core.Agent, error) {
	a, err := bridgehook.New(opts, bridgehook.Config{Bridge: b.wire(), Request: b.Request})
	if err != nil {
		return nil, err
	}
	return a.(*core.Agent), nil
}

// wire is b as the registration carries it.
func (b Bridge) wire() *agentproto.Bridge {
	w := &agentproto.Bridge{Transport: b.Transport, Target: b.Target, Server: b.Server, ServerVersion: b.ServerVersion, Unprefixed: b.Unprefixed}
	if pp := b.PerPerson; pp != nil {
		w.PerPerson = &agentproto.PerPerson{Mode: pp.Mode, URL: pp.URL, Fallback: pp.Fallback}
	}
	return w
}
