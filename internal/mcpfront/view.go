package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/pipeline"
	"github.com/spacefix/spacefix/internal/mcpfront/session"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/ratelimit"
	"github.com/spacefix/spacefix/internal/recovery"
	"github.com/spacefix/spacefix/internal/store"
)

// view is what one client key sees: an *mcp.Server whose tools, resources and
// prompts are kept equal to the key's share of its project. Mutating the
// server in place is what makes go-sdk send list_changed to the key's
// sessions.
type view struct {
	f      *Front
	key    store.Key
	server *mcp.Server

	// ready is closed once the view's first sync is done: until then
	// the server advertises part of the key's tools, or none.
	ready chan struct{}

	sess     *session.Sessions // the key's 2025 sessions and their tasks
	inflight atomic.Int64      // the key's POST requests being served
	// policySeen is the policy version of the last sync (pipeline/policy_list.go).
	policySeen atomic.Int64
	lastUsed   time.Time // when viewFor last returned it; guarded by Front.mu

	mu    sync.Mutex
	tools map[string][]byte // exposed name → JSON of the advertised tool
	// from is, by exposed name, the registry's tool and the controls an
	// advertised tool was made from. The registry keeps a tool's value
	// until its agent changes, so a sync skips the tools whose source and
	// controls are those of the last sync: an agent connecting to a
	// project of 10,000 tools re-makes one tool, not 10,000.
	from map[string]toolSource
	// execution is, by exposed name, the task support a tool was
	// advertised with: tools/list shows it (execution.go), but go-sdk's
	// tool JSON, which decides whether a client hears list_changed, has
	// no such field.
	execution map[string]string
	resources map[string][]byte // URI → JSON of the advertised resource
	templates map[string][]byte // URI template → JSON of the advertised resource template
	prompts   map[string][]byte // name → JSON of the advertised prompt
}

// viewFor returns the view of client key k, making it on first use (and
// again after it was dropped: see [Front.sweepViews]). It returns a view
// only once it is synced: the first request makes and syncs it, and
// requests of the key meanwhile wait for that sync, so none sees part of
// the key's tools (go-sdk would answer "unknown tool" for the rest).
func (f *Front) viewFor(k store.Key) *view {
	f.mu.Lock()
	v := f.views[k.ID]
	if v != nil {
		v.lastUsed = time.Now()
		f.mu.Unlock()
		<-v.ready
		return v
	}
	v = &view{f: f, key: k, ready: make(chan struct{}), lastUsed: time.Now(), tools: map[string][]byte{}, from: map[string]toolSource{}, execution: map[string]string{}, resources: map[string][]byte{}, templates: map[string][]byte{}, prompts: map[string][]byte{}}
	v.server = mcp.NewServer(f.impl, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			//lint:ignore SA1019 deprecated in 2026-07-28 (SEP-2577), still in every version served: agents log to the client with core.Log
			Logging: &mcp.LoggingCapabilities{},
		},
		Logger:            f.sdkLog,
		CompletionHandler: f.pipe.CompletionHandler,
		// Subscriptions are go-sdk's, per session; agents say when a
		// resource changed (see resourceUpdated).
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// What a key sees depends on the key: never share lists between
		// callers. Only 2026-07-28 results carry the fields; eraFields
		// removes them from those of older sessions.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.CacheScope = "private"
		},
		// No KeepAlive: go-sdk would ping sessions without a GET stream,
		// fail, and close them; see keepAlive in session/sessions.go.
		GetSessionID: func() string { return f.sessionPrefix + rand.Text() },
	})
	v.sess = f.era.ForKey(k, v.server)
	v.server.AddReceivingMiddleware(v.f.recoverPanics, v.listPolicy, v.resolve, v.toolExecution, wire.EraFields, v.sess.NoteSession, f.era.WithTasksCapability, f.ext.AdvertiseTasks, v.sess.TaskHangUp, jobToolListing)
	v.sess.AddTaskMethods()
	f.views[k.ID] = v
	f.mu.Unlock()
	defer close(v.ready) // even if the sync panics: waiters go on with what there is
	v.sync()
	return v
}

// dropView forgets client key keyID's view and closes its sessions: the
// key was revoked, so nothing of it is kept or re-synced any more.
func (f *Front) dropView(keyID, why string) {
	f.mu.Lock()
	v := f.views[keyID]
	delete(f.views, keyID)
	f.mu.Unlock()
	if v == nil {
		return
	}
	f.log.Info("mcp view dropped", "key", keyID, "reason", why)
	for s := range v.server.Sessions() {
		s.Close()
	}
}

// sweepViews drops the views that have had no session, no request in
// flight and no request at all for longer than idle. A key's next request
// builds its view again, so a key that stopped being used (or was revoked
// where the gateway did not hear of it, by the CLI) costs nothing for long.
// The check and the removal happen under f.mu, where viewFor marks a view
// used, so a view is never dropped under a request that just got it.
func (f *Front) sweepViews(idle time.Duration) {
	now := time.Now()
	f.mu.Lock()
	var gone []string
	for id, v := range f.views {
		if now.Sub(v.lastUsed) > idle && v.inflight.Load() == 0 && v.sess.Count() == 0 {
			delete(f.views, id)
			gone = append(gone, id)
		}
	}
	f.mu.Unlock()
	for _, id := range gone {
		f.log.Debug("mcp view dropped", "key", id, "reason", "idle", "idle", idle)
	}
}

// ViewCount returns how many client keys have a view now (for tests and
// operators).
func (f *Front) ViewCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.views)
}

// sync makes the server advertise exactly what the project offers this key
// now. The snapshot is read under the view's lock, so concurrent syncs can
// only end with the newest one.
func (v *view) sync() {
	v.mu.Lock()
	defer v.mu.Unlock()
	snap := v.f.reg.Snapshot(v.key.ProjectID)
	ctx := context.Background()
	pol := access.For(v.key, v.f.controls.Get(ctx, v.key.ProjectID))
	v.policySeen.Store(pol.Controls.PolicyVersion)

	var tools []*mcp.Tool
	keep := make(map[string]bool, len(snap.ToolList))
	slow := false // the key may call a tool with task support: offer the job tool
	for _, t := range snap.ToolList {
		if !pol.Permits(t) || v.f.pipe.Hidden(ctx, v.key, pol.Controls, t) {
			continue
		}
		keep[t.Name] = true
		slow = slow || t.Def.TaskSupport() != agentproto.TaskForbidden
		src := toolSource{t, pol.Controls}
		if v.from[t.Name] == src {
			continue // advertised from this very source already
		}
		v.from[t.Name] = src
		if ts := t.Def.TaskSupport(); v.execution[t.Name] != ts {
			// Advertised again even if go-sdk's JSON of it is the same,
			// so that clients hear list_changed.
			v.execution[t.Name] = ts
			delete(v.tools, t.Name)
		}
		tools = append(tools, advertisedTool(t, pol.Controls))
	}
	for n := range v.from {
		if !keep[n] {
			delete(v.from, n)
			delete(v.execution, n)
		}
	}
	v.syncJobTool(slow, keep) // pipeline/jobs.go
	mirror(v.tools, tools, keep, func(t *mcp.Tool) string { return t.Name },
		func(t *mcp.Tool) { v.server.AddTool(t, v.f.pipe.ToolHandler) }, v.server.RemoveTools)

	resources := make([]*mcp.Resource, 0, len(snap.ResourceList))
	var templates []*mcp.ResourceTemplate
	for _, r := range snap.ResourceList {
		if r.Def.Template {
			templates = append(templates, &mcp.ResourceTemplate{URITemplate: r.Def.URI, Name: r.Def.Name, Description: r.Def.Description, MIMEType: pipeline.ResourceMime(r.Def.MimeType)})
			continue
		}
		resources = append(resources, &mcp.Resource{URI: r.Def.URI, Name: r.Def.Name, Description: r.Def.Description, MIMEType: pipeline.ResourceMime(r.Def.MimeType)})
	}
	mirror(v.resources, resources, nil, func(r *mcp.Resource) string { return r.URI },
		func(r *mcp.Resource) { v.server.AddResource(r, v.f.pipe.ResourceHandler) }, v.server.RemoveResources)
	mirror(v.templates, templates, nil, func(r *mcp.ResourceTemplate) string { return r.URITemplate },
		func(r *mcp.ResourceTemplate) { v.server.AddResourceTemplate(r, v.f.pipe.TemplateHandler) }, v.server.RemoveResourceTemplates)

	prompts := make([]*mcp.Prompt, 0, len(snap.PromptList))
	for _, p := range snap.PromptList {
		mp := &mcp.Prompt{Name: p.Name, Title: p.Def.Title, Description: p.Def.Description}
		for _, a := range p.Def.Arguments {
			mp.Arguments = append(mp.Arguments, &mcp.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		prompts = append(prompts, mp)
	}
	mirror(v.prompts, prompts, nil, func(p *mcp.Prompt) string { return p.Name },
		func(p *mcp.Prompt) { v.server.AddPrompt(p, v.f.pipe.PromptHandler) }, v.server.RemovePrompts)
}

// toolSource is what an advertised tool was made from.
type toolSource struct {
	tool     *agents.Tool
	controls *access.Controls
}

// mirror makes one of a server's feature sets equal to want. have maps each
// advertised name to the JSON it was advertised with, so that only what
// changed is added again (each add or remove makes go-sdk send list_changed).
// keep, if not nil, names everything that stays, a superset of want's names
// (the caller left out what it knows is unchanged); nil means want is all.
func mirror[T any](have map[string][]byte, want []T, keep map[string]bool, name func(T) string, add func(T), remove func(...string)) {
	if keep == nil {
		keep = make(map[string]bool, len(want))
		for _, x := range want {
			keep[name(x)] = true
		}
	}
	for _, x := range want {
		n := name(x)
		b, _ := json.Marshal(x)
		if old, ok := have[n]; ok && string(old) == string(b) {
			continue
		}
		have[n] = b
		add(x)
	}
	var gone []string
	for n := range have {
		if !keep[n] {
			gone = append(gone, n)
			delete(have, n)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
	}
}

// advertisedTool is the MCP tool a client sees for t: the approved
// definition while a change waits for approval, the dashboard's description
// if it has one, with the community prefix for community agents.
func advertisedTool(t *agents.Tool, c *access.Controls) *mcp.Tool {
	def := t.Def
	if _, approved := c.Consent(t); approved != nil {
		if d, err := access.ApprovedTool(def, approved); err == nil {
			def = d
		}
	}
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       def.Title,
		Description: c.Description(t, def.Description),
		InputSchema: pipeline.WithInstanceArg(t, def.InputSchema),
	}
	if len(def.OutputSchema) > 0 {
		mt.OutputSchema = def.OutputSchema
	}
	if a := def.Annotations; a != nil {
		mt.Annotations = &mcp.ToolAnnotations{
			Title:           a.Title,
			ReadOnlyHint:    a.ReadOnlyHint != nil && *a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint,
			IdempotentHint:  a.IdempotentHint != nil && *a.IdempotentHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
	}
	return mt
}

// recoverPanics keeps a panic in one MCP request from ending the gateway:
// go-sdk runs method handlers on goroutines of its own, where nothing else
// would recover. The client gets a plain internal error (an isError result
// for tools/call), never the panic's text; the log gets the stack.
func (f *Front) recoverPanics(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer pipeline.Recovered(f.log, method, func(r mcp.Result, e error) { res, err = r, e })
		recovery.Hook("mcp " + method)
		return next(ctx, method, req)
	}
}

// resolve runs before go-sdk's own dispatch of tools/call: it looks the name
// up in the project as it is now and answers "Tool <name> not found" for
// anything this key may not call, in the same words whether the tool is
// unknown, disabled or filtered out. What it admits goes to the tool
// handler, the pipeline (pipeline/pipeline.go), as the call's [pipeline.Call].
func (v *view) resolve(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/read", "prompts/get":
			if n := v.f.controls.Get(ctx, v.key.ProjectID).Settings.RateLimitPerMinute; n > 0 {
				if ok, retry := v.f.limiter.Allow(v.key.ID, n); !ok {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: ratelimit.Message(n, retry)}
				}
			}
			return next(ctx, method, req)
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || ctr.Params == nil {
			return next(ctx, method, req)
		}
		t, c, refused, err := v.f.pipe.AdmitCall(ctx, v.key, ctr.Params.Name, false)
		if refused != nil {
			return refused, nil
		}
		if t == nil && ctr.Params.Name == pipeline.JobTool && v.offersJobTool() {
			return next(ctx, method, req) // the gateway's own tool (pipeline/jobs.go)
		}
		if err != nil {
			return nil, err
		}
		return next(pipeline.WithCall(ctx, pipeline.NewCall(t, c)), method, req)
	}
}
