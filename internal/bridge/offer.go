package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/core/bridging"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/schema"
)

// generation is one core agent built from the server's lists at one time.
type generation struct {
	agent  *core.Agent
	cancel context.CancelFunc
	done   chan struct{}
	// connected is closed when the gateway first welcomes the agent.
	connected chan struct{}
	once      sync.Once
}

// start runs the agent; once the gateway welcomed it, prev (the previous
// generation, if any) drains: make before break, so the server's tools
// never vanish from clients during a change.
func (g *generation) start(ctx context.Context, prev *generation) {
	rctx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	go func() {
		defer close(g.done)
		_ = g.agent.Run(rctx) // errors only when run twice
	}()
	if prev != nil {
		go func() {
			select {
			case <-g.connected:
			case <-g.done:
			}
			prev.stop(true)
		}()
	}
}

// finished reports whether the agent's Run has returned.
func (g *generation) finished() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// stop ends the agent: Run drains (running calls finish) and returns. With
// wait, stop returns after it has.
func (g *generation) stop(wait bool) {
	g.cancel()
	if wait {
		<-g.done
	}
}

// offer lists what the server has and builds the next generation's agent
// from it. A tool or prompt the gateway would refuse is logged with the
// reason and left out; the rest register.
func (b *Bridge) offer(ctx context.Context, up *upstream, meta bridging.Bridge) (*generation, error) {
	g := &generation{done: make(chan struct{}), connected: make(chan struct{})}
	key := b.srv.APIKey
	if key == "" {
		key = b.opts.APIKey
	}
	meta.Request = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		return b.request(ctx, up, method, params)
	}
	a, err := bridging.New(core.Options{
		APIKey:    key,
		URL:       b.opts.GatewayURL,
		Name:      b.srv.Name,
		Version:   meta.ServerVersion,
		Logger:    b.log,
		OnConnect: func() { g.once.Do(func() { close(g.connected) }) },
	}, meta)
	if err != nil {
		return nil, &fatalError{err: fmt.Errorf("bridge %q: %w", b.srv.Name, err)}
	}
	g.agent = a
	caps := &mcp.ServerCapabilities{}
	if r := up.cs.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	counts := map[string]int{}
	if caps.Tools != nil {
		for t, err := range up.cs.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("tools/list: %w", err)
			}
			if b.addTool(a, up, t) {
				counts["tools"]++
			}
		}
	}
	if caps.Prompts != nil {
		for p, err := range up.cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			if b.addPrompt(a, up, p, caps.Completions != nil) {
				counts["prompts"]++
			}
		}
	}
	if caps.Resources != nil {
		for r, err := range up.cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			if b.addResource(a, up, r) {
				counts["resources"]++
			}
		}
		for rt, err := range up.cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				break // optional for servers; many answer method not found
			}
			if b.addTemplate(a, up, rt, caps.Completions != nil) {
				counts["templates"]++
			}
		}
	}
	b.log.Info("bridge: registering", "tools", counts["tools"], "prompts", counts["prompts"], "resources", counts["resources"], "templates", counts["templates"])
	return g, nil
}

// refuse logs why one of the server's tools or prompts is not registered.
func (b *Bridge) refuse(kind, name, why string) {
	b.log.Warn("bridge: not registered; the rest are", "kind", kind, "name", name, "reason", why)
}

// exposed is the name a server's tool or prompt is registered as, and why
// the gateway would refuse it, if it would.
func (b *Bridge) exposed(kind, name string) (string, error) {
	if b.srv.Unprefixed {
		return name, agentproto.CheckToolName(kind, name)
	}
	exposed := b.srv.Name + agentproto.BridgeSeparator + name
	return exposed, agentproto.CheckBridgedName(kind, b.srv.Name, exposed)
}

func (b *Bridge) addTool(a *core.Agent, up *upstream, t *mcp.Tool) bool {
	exposed, err := b.exposed("tool", t.Name)
	if err != nil {
		b.refuse("tool", t.Name, err.Error())
		return false
	}
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		b.refuse("tool", t.Name, "its input schema is not JSON: "+err.Error())
		return false
	}
	if len(in) > agentproto.DefaultMaxSchema {
		b.refuse("tool", t.Name, fmt.Sprintf("its input schema is %s bytes; the limit is %s bytes",
			agentproto.Thousands(len(in)), agentproto.Thousands(agentproto.DefaultMaxSchema)))
		return false
	}
	if _, err := schema.CompileWith(in, schema.Options{Default2020: true}); err != nil {
		b.refuse("tool", t.Name, "its input schema does not compile: "+err.Error())
		return false
	}
	var opts []core.ToolOption
	if t.OutputSchema != nil {
		out, err := json.Marshal(t.OutputSchema)
		if err == nil {
			opts = append(opts, core.OutputSchema(out))
		}
	}
	title := t.Title
	if an := t.Annotations; an != nil {
		if title == "" {
			title = an.Title
		}
		if an.ReadOnlyHint {
			opts = append(opts, core.ReadOnly())
		} else if an.DestructiveHint != nil && *an.DestructiveHint {
			opts = append(opts, core.Destructive())
		}
		if an.IdempotentHint {
			opts = append(opts, core.Idempotent())
		}
		if an.OpenWorldHint != nil && *an.OpenWorldHint {
			opts = append(opts, core.OpenWorld())
		}
	}
	if title != "" {
		opts = append(opts, core.Title(title))
	}
	if b.srv.Timeout > 0 {
		opts = append(opts, core.Timeout(b.srv.Timeout))
	}
	if o := b.tasks.option(t.Name); o != nil {
		opts = append(opts, o)
	}
	name := t.Name
	err = a.RawTool(exposed, t.Description, in, func(ctx context.Context, args json.RawMessage) (any, error) {
		return b.callTool(ctx, up, name, args)
	}, opts...)
	if err != nil {
		b.refuse("tool", t.Name, err.Error())
		return false
	}
	return true
}

func (b *Bridge) addPrompt(a *core.Agent, up *upstream, p *mcp.Prompt, completes bool) bool {
	exposed, err := b.exposed("prompt", p.Name)
	if err != nil {
		b.refuse("prompt", p.Name, err.Error())
		return false
	}
	opts := core.PromptOptions{Title: p.Title, Description: p.Description}
	name := p.Name
	for _, arg := range p.Arguments {
		pa := core.PromptArg{Name: arg.Name, Description: arg.Description, Required: arg.Required}
		if completes {
			argName := arg.Name
			pa.Complete = func(ctx context.Context, value string, args map[string]string) ([]string, error) {
				return b.complete(ctx, up, &mcp.CompleteReference{Type: "ref/prompt", Name: name}, argName, value, args)
			}
		}
		opts.Args = append(opts.Args, pa)
	}
	err = a.Prompt(exposed, opts, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
		return b.getPrompt(ctx, up, name, args)
	})
	if err != nil {
		b.refuse("prompt", p.Name, err.Error())
		return false
	}
	return true
}

func (b *Bridge) addResource(a *core.Agent, up *upstream, r *mcp.Resource) bool {
	mime := r.MIMEType
	if mime == "" {
		mime = "text/plain"
	}
	name := r.Name
	if name == "" {
		name = r.URI
	}
	uri := r.URI
	err := a.Resource(uri, core.ResourceOptions{Name: name, Description: r.Description, MimeType: mime},
		func(ctx context.Context) (any, error) { return b.readResource(ctx, up, uri) })
	if err != nil {
		b.refuse("resource", r.URI, err.Error())
		return false
	}
	return true
}

// addTemplate bridges a resource template: reads of the URIs it matches go
// to the server, and so do completions of its variables when the server
// offers completion.
func (b *Bridge) addTemplate(a *core.Agent, up *upstream, rt *mcp.ResourceTemplate, completes bool) bool {
	name := rt.Name
	if name == "" {
		name = rt.URITemplate
	}
	opts := core.ResourceOptions{Name: name, Description: rt.Description, MimeType: rt.MIMEType}
	if opts.MimeType == "" {
		opts.MimeType = "text/plain"
	}
	tmpl := rt.URITemplate
	if completes {
		opts.Complete = func(ctx context.Context, param, value string, args map[string]string) ([]string, error) {
			return b.complete(ctx, up, &mcp.CompleteReference{Type: "ref/resource", URI: tmpl}, param, value, args)
		}
	}
	err := a.ResourceTemplate(tmpl, opts, func(ctx context.Context, uri string, _ map[string]string) (any, error) {
		return b.readResource(ctx, up, uri)
	})
	if err != nil {
		b.refuse("resource template", tmpl, err.Error())
		return false
	}
	return true
}
