package access

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

func TestAccessPolicy(t *testing.T) {
	yes := true
	read := &agents.Tool{Name: "get", AgentKey: "ak", Enabled: true,
		Def: agentproto.Tool{Name: "get", Description: "Get.", Annotations: &agentproto.Annotations{ReadOnlyHint: &yes}}}
	write := &agents.Tool{Name: "put", AgentKey: "ak", Enabled: true, Def: agentproto.Tool{Name: "put", Description: "Put."}}
	off := &agents.Tool{Name: "off", AgentKey: "ak", Def: agentproto.Tool{Name: "off", Description: "Off."}}
	approvedPut := Definition(write.Def)

	for _, tt := range []struct {
		name string
		key  store.Key
		c    Controls
		want map[string]bool
	}{
		{"plain key", store.Key{}, Controls{}, map[string]bool{"get": true, "put": true, "off": false}},
		{"read-only key", store.Key{ReadOnly: true}, Controls{}, map[string]bool{"get": true, "put": false}},
		{"read-only project", store.Key{}, Controls{Settings: store.ProjectSettings{ReadOnlyClients: true}}, map[string]bool{"get": true, "put": false}},
		{"read-only key, write counted as read", store.Key{ReadOnly: true},
			Controls{Tools: map[string]store.ToolSettings{"put": {Access: store.AccessRead}, "get": {Access: store.AccessWrite}}},
			map[string]bool{"get": false, "put": true}},
		{"allow-list", store.Key{Tools: []string{"put"}}, Controls{}, map[string]bool{"get": false, "put": true}},
		{"disabled in the dashboard", store.Key{}, Controls{Tools: map[string]store.ToolSettings{"get": {Disabled: true}}}, map[string]bool{"get": false, "put": true}},
		{"consent: only the approved", store.Key{},
			Controls{Settings: store.ProjectSettings{ApproveToolChanges: true}, Approvals: map[string]*store.Approval{"put": {Tool: "put", Definition: approvedPut}}},
			map[string]bool{"get": false, "put": true}},
	} {
		p := For(tt.key, &tt.c)
		for _, tool := range []*agents.Tool{read, write, off} {
			want, ok := tt.want[tool.Name]
			if !ok {
				continue
			}
			if got := p.Permits(tool); got != want {
				t.Errorf("%s: Permits(%s) = %v, want %v", tt.name, tool.Name, got, want)
			}
		}
	}
}

func TestAccessControls(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveToolSettings(ctx, store.ToolSettings{ProjectID: p.ID, Tool: "get", Description: "Fetch one.", CacheSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	cache := NewCache(st, time.Hour, policy.Options{})
	c := cache.Get(ctx, p.ID)
	get := &agents.Tool{Name: "get", Enabled: true, Def: agentproto.Tool{Name: "get", Description: "Get."}}
	if got := c.Description(get, get.Def.Description); got != "Fetch one." {
		t.Errorf("Description = %q, want the dashboard's", got)
	}
	if got := c.CacheFor(get); got != 30*time.Second {
		t.Errorf("CacheFor = %v, want 30s", got)
	}

	if _, err := st.SaveToolSettings(ctx, store.ToolSettings{ProjectID: p.ID, Tool: "get", CacheSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	if got := cache.Get(ctx, p.ID).CacheFor(get); got != 30*time.Second {
		t.Errorf("CacheFor before Forget = %v, want the cached 30s", got)
	}
	cache.Forget(p.ID)
	if got := cache.Get(ctx, p.ID).CacheFor(get); got != 5*time.Second {
		t.Errorf("CacheFor after Forget = %v, want 5s", got)
	}
}

// TestControlsPolicy: a saved policy reaches the controls compiled, is
// compiled once per version, and a saved document this build cannot
// compile refuses (PolicyErr) rather than letting every call through.
func TestControlsPolicy(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(st, time.Hour, policy.Options{})
	if c := cache.Get(ctx, p.ID); c.Policy != nil || c.PolicyErr != nil || c.PolicyVersion != 0 {
		t.Fatalf("controls of a project without a policy: %v, %v, version %d; want none", c.Policy, c.PolicyErr, c.PolicyVersion)
	}

	doc := `{"rules":[{"name":"no-big","on":"call","when":"args.amount > 500","effect":"deny"}]}`
	if _, err := st.SavePolicy(ctx, p.ID, 0, []byte(doc), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	cache.Forget(p.ID)
	c := cache.Get(ctx, p.ID)
	if c.Policy == nil || c.PolicyErr != nil || c.PolicyVersion != 1 {
		t.Fatalf("controls after a save: %v, %v, version %d; want version 1 compiled", c.Policy, c.PolicyErr, c.PolicyVersion)
	}
	in := &policy.Input{Tool: policy.Tool{Name: "refund"}, Args: []byte(`{"amount":900}`)}
	if d := c.Policy.Decide(policy.OnCall, in); d.Effect != policy.Deny || d.Rule != "no-big" {
		t.Errorf("Decide = %+v, want deny by no-big", d)
	}
	cache.Forget(p.ID)
	if again := cache.Get(ctx, p.ID); again.Policy != c.Policy {
		t.Error("the same version was compiled again")
	}

	// A document saved by another build that this one cannot compile.
	if _, err := st.SavePolicy(ctx, p.ID, 1, []byte(`{"rules":[{"name":"odd","on":"call","when":"args.amount >","effect":"deny"}]}`), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	cache.Forget(p.ID)
	if c := cache.Get(ctx, p.ID); c.PolicyErr == nil || c.PolicyVersion != 2 {
		t.Errorf("controls of a policy that does not compile: err %v, version %d; want an error at version 2", c.PolicyErr, c.PolicyVersion)
	}

	// Saving an empty list of rules turns the policy off.
	if _, err := st.SavePolicy(ctx, p.ID, 2, []byte(`{"rules":[]}`), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	cache.Forget(p.ID)
	if c := cache.Get(ctx, p.ID); c.Policy != nil || c.PolicyErr != nil || c.PolicyVersion != 3 {
		t.Errorf("controls of an empty policy: %v, %v, version %d", c.Policy, c.PolicyErr, c.PolicyVersion)
	}
}

// failingStore fails every read while down is set.
type failingStore struct {
	Store
	down atomic.Bool
}

func (s *failingStore) ProjectByID(ctx context.Context, id int64) (store.Project, error) {
	if s.down.Load() {
		return store.Project{}, errors.New("connection refused")
	}
	return s.Store.ProjectByID(ctx, id)
}

// A project whose controls were never read, because the store did not
// answer, is not run as one without a policy or tool settings: its calls
// are refused until the store answers (fail closed). Controls read once
// are kept through a later outage.
func TestControlsUnread(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SavePolicy(ctx, p.ID, 0, []byte(`{"rules":[{"name":"no-big","on":"call","when":"args.amount > 500","effect":"deny"}]}`), "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	fs := &failingStore{Store: st}
	fs.down.Store(true)
	cache := NewCache(fs, time.Millisecond, policy.Options{})
	c := cache.Get(ctx, p.ID)
	if !errors.Is(c.PolicyErr, ErrUnread) || c.RefusedMessage() != UnreadMessage {
		t.Fatalf("controls of a project the store would not give: err %v, message %q; want ErrUnread and %q", c.PolicyErr, c.RefusedMessage(), UnreadMessage)
	}
	fs.down.Store(false)
	time.Sleep(2 * time.Millisecond)
	if c := cache.Get(ctx, p.ID); c.PolicyErr != nil || c.Policy == nil || c.PolicyVersion != 1 {
		t.Fatalf("controls once the store answers: %v, %v, version %d; want version 1 compiled", c.Policy, c.PolicyErr, c.PolicyVersion)
	}
	fs.down.Store(true)
	time.Sleep(2 * time.Millisecond)
	if c := cache.Get(ctx, p.ID); c.PolicyErr != nil || c.PolicyVersion != 1 {
		t.Errorf("controls during a later outage: err %v, version %d; want the last known ones", c.PolicyErr, c.PolicyVersion)
	}
}
