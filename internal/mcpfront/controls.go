package mcpfront

import (
	"context"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/toolctl"
)

// controls is what the dashboard has said about one project, as the MCP
// side needs it on every request: the project's settings, per-tool
// settings, consent decisions and agent key descriptions. It is read-only
// once built.
type controls struct {
	settings  store.ProjectSettings
	tools     map[string]store.ToolSettings // by exposed tool name
	approvals map[string]*store.Approval    // by exposed tool name
	agentKeys map[string]store.Key          // agent keys by id
}

// consent returns where t stands with the project's consent setting, and
// the approved definition clients see meanwhile (nil: as registered).
func (c *controls) consent(t *agents.Tool) (visible bool, approved []byte) {
	if !c.settings.ApproveToolChanges {
		return true, nil
	}
	a := c.approvals[t.Name]
	switch st := toolctl.State(toolctl.Definition(t.Def), a); {
	case !st.Visible():
		return false, nil
	case st == toolctl.Approved:
		return true, nil
	default:
		return true, a.Definition
	}
}

// readOnly reports whether t counts as a read, after the dashboard's
// override.
func (c *controls) readOnly(t *agents.Tool) bool {
	return toolctl.ReadOnly(t.ReadOnly(), c.tools[t.Name])
}

// controlsCache keeps each project's controls for ttl, so the call path
// does not read the store on every request. The dashboard's saves drop the
// entry at once (see [Front.SettingsChanged]).
type controlsCache struct {
	store store.Store
	ttl   time.Duration

	mu sync.Mutex
	m  map[int64]cachedControls
}

type cachedControls struct {
	c       *controls
	expires time.Time
}

func newControlsCache(s store.Store, ttl time.Duration) *controlsCache {
	return &controlsCache{store: s, ttl: ttl, m: make(map[int64]cachedControls)}
}

// get returns a project's controls. On a store error it keeps the last
// known ones (or the defaults), so the gateway goes on serving.
func (cc *controlsCache) get(ctx context.Context, projectID int64) *controls {
	now := time.Now()
	cc.mu.Lock()
	cur, ok := cc.m[projectID]
	cc.mu.Unlock()
	if ok && now.Before(cur.expires) {
		return cur.c
	}
	c, err := cc.load(context.WithoutCancel(ctx), projectID)
	if err != nil {
		c = cur.c
		if c == nil {
			c = &controls{}
		}
	}
	cc.mu.Lock()
	cc.m[projectID] = cachedControls{c: c, expires: now.Add(cc.ttl)}
	cc.mu.Unlock()
	return c
}

func (cc *controlsCache) load(ctx context.Context, projectID int64) (*controls, error) {
	p, err := cc.store.ProjectByID(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ts, err := cc.store.ToolSettings(ctx, projectID)
	if err != nil {
		return nil, err
	}
	as, err := cc.store.Approvals(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ks, err := cc.store.Keys(ctx, projectID)
	if err != nil {
		return nil, err
	}
	c := &controls{
		settings:  p.Settings,
		tools:     make(map[string]store.ToolSettings, len(ts)),
		approvals: make(map[string]*store.Approval, len(as)),
		agentKeys: make(map[string]store.Key),
	}
	for _, t := range ts {
		c.tools[t.Tool] = t
	}
	for i := range as {
		c.approvals[as[i].Tool] = &as[i]
	}
	for _, k := range ks {
		if k.Kind == store.KindAgent {
			c.agentKeys[k.ID] = k
		}
	}
	return c, nil
}

func (cc *controlsCache) forget(projectID int64) {
	cc.mu.Lock()
	delete(cc.m, projectID)
	cc.mu.Unlock()
}
