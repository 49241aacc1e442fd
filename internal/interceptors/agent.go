package interceptors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Agents carries interceptor requests to the bridged agents of one
// project (`spacefix bridge` in front of an interceptor server), for the
// entries of its policy that name an agent. Its methods are called
// concurrently, on the call path.
type Agents interface {
	// Request sends a custom MCP request to the bridged agent named name
	// and returns the server's result. The server's JSON-RPC error is a
	// *jsonrpc.Error; [ErrNotConnected] and [ErrNotBridged] say why the
	// request could not be sent.
	Request(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error)
	// Connection identifies the agent's connections now: it changes when
	// the agent connects again (the bridge restarted its server), and is
	// "" while it is not connected.
	Connection(name string) string
}

// MaxWait bounds a request to a bridged agent whose context has no
// deadline (every request of a chain has one: the interceptor's timeout).
const MaxWait = time.Minute

// Why a request could not reach a bridged agent.
var (
	ErrNotConnected = errors.New("the agent is not connected")
	ErrNotBridged   = errors.New("the agent is not a bridged MCP server")
)

// agentConn is a server behind a bridged agent of the project.
type agentConn struct {
	agents Agents // nil: not reachable
	name   string
}

func (a *agentConn) state() string {
	if a.agents == nil {
		return ""
	}
	return a.agents.Connection(a.name)
}

func (a *agentConn) list(ctx context.Context) ([]Info, error) {
	var res ListResult
	if err := a.request(ctx, MethodList, &ListParams{}, &res); err != nil {
		return nil, err
	}
	return res.Interceptors, nil
}

func (a *agentConn) invoke(ctx context.Context, p *InvokeParams) (*InvokeResult, error) {
	var res InvokeResult
	if err := a.request(ctx, MethodInvoke, p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (a *agentConn) request(ctx context.Context, method string, params, result any) error {
	if a.agents == nil {
		return ErrNotConnected
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	out, err := a.agents.Request(ctx, a.name, method, b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, result); err != nil {
		return fmt.Errorf("%s: the answer is not what the extension defines: %v", method, err)
	}
	return nil
}

func (a *agentConn) close() {}
