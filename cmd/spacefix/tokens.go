package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// tokens manages admin API tokens on the store file, so that a script or CI
// job can get one without a browser.
func tokens(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("tokens", args, "create", "list", "revoke"); err != nil {
		return err
	}
	fs := newFlagSet("tokens "+args[0], stdout)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	name := fs.String("name", "", "a `label` for people (create)")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if len(pos) > 0 {
			return usageError{"tokens create: takes no arguments; name it with --name"}
		}
		return withStore(ctx, *data, func(st store.Store) error { return tokensCreate(ctx, st, *name, *asJSON, stdout) })
	case "list":
		return withStore(ctx, *data, func(st store.Store) error { return tokensList(ctx, st, *asJSON, stdout) })
	default: // "revoke"; subcommand checked the name
		if len(pos) != 1 {
			return usageError{"tokens revoke: want one token ID (see spacefix tokens list)"}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			if err := st.RevokeAPIToken(ctx, pos[0]); errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no token %q; see spacefix tokens list", pos[0])
			} else if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "Revoked %s. The admin API refuses it from now on.\n", pos[0])
			return nil
		})
	}
}

func tokensCreate(ctx context.Context, st store.Store, name string, asJSON bool, stdout io.Writer) error {
	tok, secret, err := users.CreateAPIToken(ctx, st, name, 0)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"id": tok.ID, "token": secret, "name": tok.Name})
	}
	fmt.Fprintf(stdout, "Created admin API token %s. Save it now; it cannot be shown again:\n\n  %s\n\n"+
		"Use it with: spacefix tools list --token %s   (or set SPACEFIX_TOKEN)\n", tok.ID, secret, secret)
	return nil
}

func tokensList(ctx context.Context, st store.Store, asJSON bool, stdout io.Writer) error {
	ts, err := st.APITokens(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]map[string]any, 0, len(ts))
		for _, t := range ts {
			out = append(out, map[string]any{"id": t.ID, "name": t.Name, "createdAt": t.CreatedAt, "revoked": t.Revoked()})
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tSTATE")
	for _, t := range ts {
		state := "live"
		if t.Revoked() {
			state = "revoked"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.DateTime), state)
	}
	return tw.Flush()
}
