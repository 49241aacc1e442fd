package access

import (
	"context"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
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
	cache := NewCache(st, time.Hour)
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
