package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
)

// policyInterceptors prints GET …/policy/interceptors: each interceptor
// server of the saved policy as the gateway asked found it.
func policyInterceptors(ctx context.Context, args []string, stdout io.Writer) error {
	var c *apiClient
	return apiShow(ctx, "policy interceptors", args, stdout, func(ac *apiClient) string {
		c = ac
		return c.projectPath("/policy/interceptors")
	}, func(w io.Writer, p apitypes.PolicyInterceptors) error { return printInterceptors(w, c, p) })
}

func printInterceptors(w io.Writer, c *apiClient, p apitypes.PolicyInterceptors) error {
	if len(p.Servers) == 0 {
		_, err := fmt.Fprintf(w, "The policy of project %q lists no interceptor servers.\n", c.project)
		return err
	}
	fmt.Fprintf(w, "Interceptor servers of project %q, policy version %d, as the gateway at %s found them:\n", c.project, p.Version, c.base)
	for _, s := range p.Servers {
		at := s.URL
		if s.Agent != "" {
			at = "agent " + s.Agent
		}
		if at != s.Name {
			at = "  " + at
		} else {
			at = ""
		}
		fmt.Fprintf(w, "\n%s%s\n  %s\n", s.Name, at, serverState(s))
		if len(s.Interceptors) == 0 {
			continue
		}
		t := newTable(w, "  INTERCEPTOR", "TYPE", "HOOKS", "PRIORITY", "MODE")
		for _, in := range s.Interceptors {
			hooks := make([]string, len(in.Hooks))
			for i, h := range in.Hooks {
				hooks[i] = h.Event + " " + h.Phase
			}
			prio := "-"
			if in.PriorityHint != nil {
				prio = in.PriorityHint.String()
			}
			mode := in.Mode
			if in.FailOpen {
				mode += ", fails open"
			}
			t.row("  "+in.Name, in.Type, strings.Join(hooks, ", "), prio, mode)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

// serverState is one line on what the gateway found at s.
func serverState(s apitypes.InterceptorServer) string {
	checked := ""
	if s.CheckedAt != nil {
		checked = " at " + s.CheckedAt.UTC().Format(time.DateTime) + " UTC"
	}
	switch s.State {
	case apitypes.InterceptorsListed:
		return "listed " + plural(len(s.Interceptors), "interceptor") + checked
	case apitypes.InterceptorsUnreachable:
		return fmt.Sprintf("could not be listed%s: %s", checked, s.Error)
	}
	return "not listed yet: this gateway has not asked it yet"
}
