package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/textfmt"
)

func tools(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "tools", args, stdout, command{"list", toolsList}, command{"set", toolsSet})
}

func toolsList(ctx context.Context, args []string, stdout io.Writer) error {
	return apiShow(ctx, "tools list", args, stdout, func(c *apiClient) string { return c.projectPath("/tools") }, printTools)
}

func printTools(w io.Writer, rows []apitypes.Tool) error {
	t := newTable(w, "TOOL", "COUNTS AS", "REQUEST ID", "STATE", "DESCRIPTION MODELS SEE")
	for _, r := range rows {
		counts := "write"
		if r.ReadOnly {
			counts = "read"
		}
		if !r.Registered {
			counts = "-"
		}
		// REQUEST ID: the argument a repeat-safe tool's request id
		// travels in; the gateway answers repeats of an id itself.
		t.row(r.Name, counts, orDash(r.IdempotencyKey), toolState(r), clip(r.Description, 60))
	}
	return t.flush()
}

// toolState is a tool's pills, as the dashboard shows them.
func toolState(r apitypes.Tool) string {
	var state []string
	for _, p := range r.Pills {
		state = append(state, p.Text)
	}
	return orDash(strings.Join(state, ", "))
}

func toolsSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("tools set", stdout)
	client := apiFlags(fs)
	desc := fs.String("description", "", "the description models see, up to 1000 characters; \"\" restores the registered one")
	cache := fs.Int("cache", 0, "cache results for `SECONDS`, 0 (off) to 3600")
	access := fs.String("access", "", "follow, read or write: whether read-only clients may see and call the tool")
	disabled := fs.Bool("disabled", false, "hide the tool from every client and refuse its calls (--disabled=false brings it back)")
	approve := fs.Bool("approve", false, "approve the tool's current definition (with Approve tool changes on)")
	reject := fs.Bool("reject", false, "reject the tool's current definition")
	create := fs.Bool("create", false, "save settings for a tool no agent has offered yet (without it, a name no agent offered is refused as a likely typo)")
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"tools set: want one tool name, for example: spacefix tools set get_order --cache 30"}
	}
	given := setFlags(fs)
	var patch apitypes.ToolPatch
	for flag, set := range map[string]func(){
		"description": func() { patch.Description = desc }, "cache": func() { patch.CacheSeconds = cache },
		"access": func() { patch.Access = access }, "disabled": func() { patch.Disabled = disabled },
	} {
		if given[flag] {
			set()
		}
	}
	changed := patch != (apitypes.ToolPatch{})
	if *approve && *reject {
		return usageError{"tools set: --approve and --reject exclude each other"}
	}
	if !changed && !*approve && !*reject {
		return usageError{"tools set: nothing to change; pass --description, --cache, --access, --disabled, --approve or --reject"}
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	tool := pos[0]
	if !*create {
		if err := knownTool(ctx, c, tool); err != nil {
			return err
		}
	}
	if changed {
		if err := c.do(ctx, "PATCH", c.projectPath("/tools/%s", tool), patch, &raw); err != nil {
			return apiFieldFlags(err, map[string]string{"cacheSeconds": "cache", "description": "description", "access": "access", "disabled": "disabled"})
		}
	}
	if *approve || *reject {
		verb := "reject"
		if *approve {
			verb = "approve"
		}
		if err := c.do(ctx, "POST", c.projectPath("/tools/%s/%s", tool, verb), map[string]any{}, &raw); err != nil {
			return err
		}
	}
	return printAs(stdout, *asJSON, raw, func(w io.Writer, row apitypes.Tool) error {
		_, err := fmt.Fprintf(w, "Saved %s in project %q: %s. MCP clients see it on their next request.\n", tool, c.project, toolState(row))
		return err
	})
}

// knownTool refuses a tool name that no agent of the project has offered:
// neither registered now nor with saved settings from an earlier visit.
func knownTool(ctx context.Context, c *apiClient, tool string) error {
	var rows []apitypes.Tool
	if err := c.do(ctx, "GET", c.projectPath("/tools"), nil, &rows); err != nil {
		return err
	}
	var names []string
	for _, r := range rows {
		if r.Name == tool {
			return nil
		}
		names = append(names, r.Name)
	}
	known := "no agent has offered a tool yet"
	if len(names) > 0 {
		known = "the tools are: " + strings.Join(names, ", ")
	}
	return fmt.Errorf("tools set: project %q has no tool %q (%s); check the name, or pass --create to save settings for a tool an agent will offer later", c.project, tool, known)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to n characters for a table.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return textfmt.Cut(s, n-1) + "…"
}
