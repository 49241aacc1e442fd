package access

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
)

// Controls is what the dashboard has said about one project, as the MCP
// side needs it on every request: the project's settings, per-tool
// settings, consent decisions and agent key descriptions. It is read-only
// once built.
type Controls struct {
	Settings  store.ProjectSettings
	Tools     map[string]store.ToolSettings // by exposed tool name
	Approvals map[string]*store.Approval    // by exposed tool name
	AgentKeys map[string]store.Key          // agent keys by id

	// Policy is the project's compiled policy (package policy); nil when
	// it has no rules and no interceptors. PolicyVersion is its saved
	// version (0: none saved).
	Policy        *policy.Policy
	PolicyVersion int64
	// PolicyErr is why the saved policy could not be compiled on this
	// build (a document an older or newer build accepted): every call of
	// the project is refused with [PolicyBrokenMessage] until an owner
	// saves one that compiles. Fail closed: the rules may have denied.
	PolicyErr error
}

// PolicyBrokenMessage is what a call is answered while the project's saved
// policy does not compile ([Controls.PolicyErr]).
const PolicyBrokenMessage = "This call was refused: the project's policy could not be loaded. An owner can check it with `spacefix policy show` and save one that compiles."

// ErrUnread is the [Controls.PolicyErr] of a project whose controls the
// gateway has not been able to read from its store yet: its policy and
// tool settings are unknown, so its calls are refused with
// [UnreadMessage] rather than run as if it had none (fail closed).
var ErrUnread = errors.New("the project's settings could not be read from the store")

// UnreadMessage is what a call is answered while the project's controls
// could not be read ([ErrUnread]).
const UnreadMessage = "This call was refused: the gateway could not read the project's settings and policy from its store. Try again in a moment."

// RefusedMessage is what a call is answered while c.PolicyErr is set.
func (c *Controls) RefusedMessage() string {
	if errors.Is(c.PolicyErr, ErrUnread) {
		return UnreadMessage
	}
	return PolicyBrokenMessage
}

// Consent returns where t stands with the project's consent setting, and
// the approved definition clients see meanwhile (nil: as registered).
func (c *Controls) Consent(t *agents.Tool) (visible bool, approved []byte) {
	if !c.Settings.ApproveToolChanges {
		return true, nil
	}
	a := c.Approvals[t.Name]
	switch st := State(Definition(t.Def), a); {
	case !st.Visible():
		return false, nil
	case st == Approved:
		return true, nil
	default:
		return true, a.Definition
	}
}

// ReadOnly reports whether t counts as a read, after the dashboard's
// override.
func (c *Controls) ReadOnly(t *agents.Tool) bool {
	return ReadOnly(t.ReadOnly(), c.Tools[t.Name])
}

// Description is the description clients see for t whose definition as
// shown (the approved one while a change waits) describes it as shown.
func (c *Controls) Description(t *agents.Tool, shown string) string {
	return Description(shown, c.Tools[t.Name], c.AgentKeys[t.AgentKey], t.Reg)
}

// CacheFor is how long results of t are cached; 0: not at all.
func (c *Controls) CacheFor(t *agents.Tool) time.Duration {
	return time.Duration(c.Tools[t.Name].CacheSeconds) * time.Second
}

// Store is the part of [store.Store] the controls are read from.
type Store interface {
	ProjectByID(ctx context.Context, id int64) (store.Project, error)
	ToolSettings(ctx context.Context, projectID int64) ([]store.ToolSettings, error)
	Policy(ctx context.Context, projectID int64) (store.Policy, error)
	Approvals(ctx context.Context, projectID int64) ([]store.Approval, error)
	Keys(ctx context.Context, projectID int64) ([]store.Key, error)
}

// Cache keeps each project's controls for a TTL, so the call path does not
// read the store on every request. Saves drop the entry at once
// ([Cache.Forget], called on the change path).
type Cache struct {
	store Store
	ttl   time.Duration
	opts  policy.Options

	mu       sync.Mutex
	m        map[int64]cachedControls
	compiled map[int64]compiledPolicy // by project: its newest version, compiled once
}

// compiledPolicy is one project's policy version as compiled.
type compiledPolicy struct {
	version int64
	p       *policy.Policy
	err     error
}

type cachedControls struct {
	c       *Controls
	expires time.Time
}

// NewCache returns a cache of the controls in s, each kept for ttl; a
// project's policy is compiled with opts once per saved version.
func NewCache(s Store, ttl time.Duration, opts policy.Options) *Cache {
	return &Cache{store: s, ttl: ttl, opts: opts, m: make(map[int64]cachedControls), compiled: make(map[int64]compiledPolicy)}
}

// Get returns a project's controls. On a store error it keeps the last
// known ones, so the gateway goes on serving; when there are none yet it
// returns controls whose PolicyErr is [ErrUnread] (every call refused),
// and reads the store again after the TTL.
func (cc *Cache) Get(ctx context.Context, projectID int64) *Controls {
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
			c = &Controls{PolicyErr: ErrUnread}
		}
	}
	cc.mu.Lock()
	cc.m[projectID] = cachedControls{c: c, expires: now.Add(cc.ttl)}
	cc.mu.Unlock()
	return c
}

// Forget drops a project's cached controls: the next Get reads the store.
func (cc *Cache) Forget(projectID int64) {
	cc.mu.Lock()
	delete(cc.m, projectID)
	cc.mu.Unlock()
}

// load reads a project's controls, compiling its policy only when its
// version changed since the last load.
func (cc *Cache) load(ctx context.Context, projectID int64) (*Controls, error) {
	return loadWith(ctx, cc.store, projectID, func(sp store.Policy) (*policy.Policy, error) {
		cc.mu.Lock()
		prev, ok := cc.compiled[projectID]
		cc.mu.Unlock()
		if ok && prev.version == sp.Version {
			return prev.p, prev.err
		}
		p, err := compilePolicy(sp, cc.opts)
		if err != nil && cc.opts.Log != nil {
			cc.opts.Log.Error("the project's saved policy does not compile; its calls are refused until an owner saves one that does",
				"project", projectID, "version", sp.Version, "err", err)
		}
		cc.mu.Lock()
		cc.compiled[projectID] = compiledPolicy{version: sp.Version, p: p, err: err}
		cc.mu.Unlock()
		return p, err
	})
}

// compilePolicy compiles a saved policy; nil when it has no rules and no
// interceptors.
func compilePolicy(sp store.Policy, opts policy.Options) (*policy.Policy, error) {
	if sp.Version == 0 || len(sp.Document) == 0 {
		return nil, nil
	}
	d, err := policy.Parse(sp.Document)
	if err != nil {
		return nil, err
	}
	if len(d.Rules) == 0 && len(d.Interceptors) == 0 {
		return nil, nil
	}
	return policy.Compile(d, opts)
}

// Load reads a project's controls from the store, compiling its policy.
func Load(ctx context.Context, st Store, projectID int64) (*Controls, error) {
	return loadWith(ctx, st, projectID, func(sp store.Policy) (*policy.Policy, error) {
		return compilePolicy(sp, policy.Options{})
	})
}

func loadWith(ctx context.Context, st Store, projectID int64, compile func(store.Policy) (*policy.Policy, error)) (*Controls, error) {
	p, err := st.ProjectByID(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ts, err := st.ToolSettings(ctx, projectID)
	if err != nil {
		return nil, err
	}
	as, err := st.Approvals(ctx, projectID)
	if err != nil {
		return nil, err
	}
	ks, err := st.Keys(ctx, projectID)
	if err != nil {
		return nil, err
	}
	sp, err := st.Policy(ctx, projectID)
	if err != nil {
		return nil, err
	}
	c := &Controls{
		Settings:  p.Settings,
		Tools:     make(map[string]store.ToolSettings, len(ts)),
		Approvals: make(map[string]*store.Approval, len(as)),
		AgentKeys: make(map[string]store.Key),
	}
	c.Policy, c.PolicyErr = compile(sp)
	c.PolicyVersion = sp.Version
	for _, t := range ts {
		c.Tools[t.Tool] = t
	}
	for i := range as {
		c.Approvals[as[i].Tool] = &as[i]
	}
	for _, k := range ks {
		if k.Kind == store.KindAgent {
			c.AgentKeys[k.ID] = k
		}
	}
	return c, nil
}
