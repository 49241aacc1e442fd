package access

import (
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/policy"
)

// PolicyTool is t as a project's policy rules read it (`tool` in CEL), the
// same for the call path and for the dashboard's try-it: readOnly after
// the dashboard's setting, the annotations the agent declared, and MCP's
// default for destructive (a tool that is not read-only may be).
func (c *Controls) PolicyTool(t *agents.Tool) policy.Tool {
	pt := policy.Tool{Name: t.Name, Agent: c.AgentKeys[t.AgentKey].Name, ReadOnly: c.ReadOnly(t), Annotations: map[string]any{}}
	a := t.Def.Annotations
	if a != nil {
		for k, v := range map[string]*bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
			"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint} {
			if v != nil {
				pt.Annotations[k] = *v
			}
		}
		if a.Title != "" {
			pt.Annotations["title"] = a.Title
		}
	}
	pt.Destructive = !pt.ReadOnly && (a == nil || a.DestructiveHint == nil || *a.DestructiveHint)
	return pt
}
