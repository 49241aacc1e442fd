// Package bridging is for the Spacefix gateway's own `spacefix bridge`
// only: it makes a [core.Agent] that stands for an existing MCP server,
// whose tool and prompt names carry the server's name and whose
// registration tells the dashboard what it bridges. Providers never need
// it; it is not part of the SDK's API and may change in any release.
package bridging

import (
	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/agentproto"
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
}

// PerPerson says a bridged remote acts as each caller's own upstream
// account: Mode "connect" or "exchange", URL (connect: the remote MCP URL
// people connect to, without userinfo) and Fallback ("shared": calls
// without a person use the bridge's own account; "": refused).
type PerPerson struct {
	Mode, URL, Fallback string
}

// Options are what a bridged agent has beyond [core.Options].
type Options struct {
	// Bridge is the server the agent stands for. Its tool and prompt names
	// must then be <core.Options.Name>__<the server's name> unless
	// Bridge.Unprefixed, so core.Options.Name is required and Namespace
	// must be false.
	Bridge Bridge
	// OnConnect, if set, is called each time the gateway welcomes a
	// connection, after which calls may arrive; it must not block. Nil
	// means nothing is called.
	OnConnect func()
}

// New returns a bridged agent configured by opts and b, as [core.New]
// does an ordinary one.
func New(opts core.Options, b Options) (*core.Agent, error) {
	a, err := bridgehook.New(opts, bridgehook.Config{Bridge: b.Bridge.wire(), OnConnect: b.OnConnect})
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
