package access

import (
	"slices"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/store"
)

// Policy says which tools one client key may see and call.
type Policy struct {
	ReadOnly bool     // the key, or every client of the project, is read-only
	Allow    []string // the key's allow-list; empty: every tool
	Controls *Controls
}

// For returns the policy of client key k in a project with controls c.
func For(k store.Key, c *Controls) Policy {
	return Policy{ReadOnly: k.ReadOnly || c.Settings.ReadOnlyClients, Allow: k.Tools, Controls: c}
}

// Permits reports whether the key may see and call t: enabled by its
// agent and the dashboard, approved if the project wants approval, a read
// for a read-only key, and on the key's allow-list if it has one.
func (p Policy) Permits(t *agents.Tool) bool {
	if !t.Enabled || p.Controls.Tools[t.Name].Disabled {
		return false
	}
	if p.ReadOnly && !p.Controls.ReadOnly(t) {
		return false
	}
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, t.Name) {
		return false
	}
	visible, _ := p.Controls.Consent(t)
	return visible
}
