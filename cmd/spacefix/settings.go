package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
)

func settings(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "settings", args, stdout, command{"show", settingsShow}, command{"set", settingsSet})
}

func settingsShow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("settings show", stdout)
	client := apiFlags(fs)
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "GET", c.projectPath(""), nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	return printSettings(stdout, raw)
}

func printSettings(w io.Writer, raw json.RawMessage) error {
	var p apitypes.Project
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	s := p.Settings
	access := map[string]string{"read": "read only", "readwrite": "read and write"}[s.ClientAccess]
	limit := func(n int) string {
		if n == 0 {
			return "default"
		}
		return fmt.Sprint(n)
	}
	rate := "none"
	if s.RateLimitPerMinute > 0 {
		rate = fmt.Sprintf("%d calls per minute per key", s.RateLimitPerMinute)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Project\t%s\nMCP endpoint\t%s\nCall wait\t%d s\nClient access\t%s\nApprove tool changes\t%v\nRate limit\t%s\n",
		p.Name, p.MCPURL, s.CallWaitSeconds, access, s.ApproveToolChanges, rate)
	fmt.Fprintf(tw, "Max tools per agent\t%s\nMax schema bytes\t%s\nMax resources\t%s\nMax registration bytes\t%s\n",
		limit(s.MaxTools), limit(s.MaxSchemaBytes), limit(s.MaxResources), limit(s.MaxRegistrationBytes))
	return tw.Flush()
}

func settingsSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("settings set", stdout)
	client := apiFlags(fs)
	wait := fs.Int("call-wait", 0, "how long a call waits for its result, 1 to 30 `SECONDS`")
	access := fs.String("client-access", "", "read (every client is read-only) or readwrite")
	approve := fs.Bool("approve-tool-changes", false, "hold new and changed tools as pending until approved (=false turns it off)")
	rate := fs.Int("rate-limit", 0, "calls per minute one client key may make; 0 means no limit")
	maxTools := fs.Int("max-tools", 0, "tools per agent; 0 means the default")
	maxSchema := fs.Int("max-schema-bytes", 0, "bytes of input schema per tool; 0 means the default")
	maxRes := fs.Int("max-resources", 0, "resources per agent; 0 means the default")
	maxReg := fs.Int("max-registration-bytes", 0, "bytes of one registration; 0 means the default")
	asJSON := fs.Bool("json", false, "print the admin API's JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	given := setFlags(fs)
	var patch apitypes.SettingsPatch
	for flag, set := range map[string]func(){
		"call-wait": func() { patch.CallWaitSeconds = wait }, "client-access": func() { patch.ClientAccess = access },
		"approve-tool-changes": func() { patch.ApproveToolChanges = approve }, "rate-limit": func() { patch.RateLimitPerMinute = rate },
		"max-tools": func() { patch.MaxTools = maxTools }, "max-schema-bytes": func() { patch.MaxSchemaBytes = maxSchema },
		"max-resources": func() { patch.MaxResources = maxRes }, "max-registration-bytes": func() { patch.MaxRegistrationBytes = maxReg },
	} {
		if given[flag] {
			set()
		}
	}
	if patch == (apitypes.SettingsPatch{}) {
		return usageError{"settings set: nothing to change; see spacefix settings set --help"}
	}
	c, err := client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "PATCH", c.projectPath("/settings"), patch, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	fmt.Fprintln(stdout, "Saved. MCP clients get the new settings on their next request.")
	return printSettings(stdout, raw)
}
