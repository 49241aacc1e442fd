package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// tokens manages API tokens on the store, so that a script or CI job can
// get one without a browser: instance tokens (admin rights), or with
// --project and --role a token for one project.
func tokens(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("tokens", args, "create", "list", "revoke"); err != nil {
		return err
	}
	fs := newFlagSet("tokens "+args[0], stdout)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	name := fs.String("name", "", "a `label` for people (create)")
	project := fs.String("project", "", "make a token for this project `name` only (create), or list only its tokens")
	role := fs.String("role", "", "the project token's role: viewer, editor or owner (create, with --project)")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if len(pos) > 0 {
			return usageError{"tokens create: takes no arguments; name it with --name"}
		}
		if (*project == "") != (*role == "") {
			return usageError{"tokens create: --project and --role go together (--role viewer|editor|owner); without both the token is an instance admin token"}
		}
		if *role != "" && !store.Role(*role).Valid() {
			return usageError{fmt.Sprintf("tokens create: --role must be viewer, editor or owner, not %q", *role)}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			return tokensCreate(ctx, st, *name, *project, store.Role(*role), *asJSON, stdout)
		})
	case "list":
		return withStore(ctx, *data, func(st store.Store) error { return tokensList(ctx, st, *project, *asJSON, stdout) })
	default: // "revoke"; subcommand checked the name
		if len(pos) != 1 {
			return usageError{"tokens revoke: want one token ID (see spacefix tokens list)"}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			ts, err := st.APITokens(ctx)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(ts, func(t store.APIToken) bool { return t.ID == pos[0] })
			if i < 0 {
				return fmt.Errorf("no token %q; see spacefix tokens list", pos[0])
			}
			if err := st.RevokeAPIToken(ctx, pos[0]); err != nil {
				return err
			}
			after := store.TokenAudit(ts[i])
			after["revoked"] = true
			cliAudit(ctx, st, ts[i].ProjectID, "token.revoke", ts[i].ID, store.TokenAudit(ts[i]), after)
			fmt.Fprintf(stdout, "Revoked %s. The admin API refuses it from now on.\n", pos[0])
			return nil
		})
	}
}

// tokenStore is what the token commands read and write.
type tokenStore interface {
	store.Projects
	store.APITokens
	store.Audit
}

func tokensCreate(ctx context.Context, st tokenStore, name, project string, role store.Role, asJSON bool, stdout io.Writer) error {
	var (
		tok    store.APIToken
		secret string
		p      store.Project
		err    error
	)
	if project == "" {
		tok, secret, err = users.CreateAPIToken(ctx, st, name, 0)
	} else {
		if p, err = st.Project(ctx, project); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no project %q; see spacefix projects list", project)
		} else if err != nil {
			return err
		}
		tok, secret, err = users.CreateProjectToken(ctx, st, name, 0, p.ID, role)
	}
	if err != nil {
		return err
	}
	cliAudit(ctx, st, tok.ProjectID, "token.create", tok.ID, nil, store.TokenAudit(tok))
	if asJSON {
		out := map[string]any{"id": tok.ID, "token": secret, "name": tok.Name}
		if project != "" {
			out["project"], out["role"] = p.Name, tok.Role
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if project == "" {
		fmt.Fprintf(stdout, "Created admin API token %s. It acts as an instance admin. Save it now; it cannot be shown again:\n\n  %s\n\n", tok.ID, secret)
	} else {
		fmt.Fprintf(stdout, "Created API token %s for project %q with the %s role; it can do nothing elsewhere. Save it now; it cannot be shown again:\n\n  %s\n\n", tok.ID, p.Name, tok.Role, secret)
	}
	fmt.Fprintf(stdout, "Use it with: spacefix tools list --token %s   (or set SPACEFIX_TOKEN)\n", secret)
	return nil
}

// cliAudit records a change made on the store from the command line. The
// change is made already; a failure to record it is printed, not fatal.
func cliAudit(ctx context.Context, st store.Audit, projectID int64, action, target string, before, after any) {
	if _, err := st.AppendAudit(ctx, store.NewAuditEntry(projectID, store.ActorCLI, "", action, target, before, after)); err != nil {
		fmt.Fprintf(os.Stderr, "spacefix: warning: the audit log did not record %s %s: %v\n", action, target, err)
	}
}

func tokensList(ctx context.Context, st tokenStore, project string, asJSON bool, stdout io.Writer) error {
	ts, err := st.APITokens(ctx)
	if err != nil {
		return err
	}
	ps, err := st.Projects(ctx)
	if err != nil {
		return err
	}
	names := map[int64]string{}
	for _, p := range ps {
		names[p.ID] = p.Name
	}
	if project != "" {
		ts = slices.DeleteFunc(ts, func(t store.APIToken) bool { return names[t.ProjectID] != project || t.ProjectID == 0 })
	}
	if asJSON {
		return printEach(stdout, ts, false, func(t store.APIToken) any {
			m := map[string]any{"id": t.ID, "name": t.Name, "createdAt": t.CreatedAt, "revoked": t.Revoked()}
			if t.ProjectID != 0 {
				m["project"], m["role"] = names[t.ProjectID], t.Role
			}
			return m
		})
	}
	tab := newTable(stdout, "ID", "NAME", "SCOPE", "CREATED", "STATE")
	for _, t := range ts {
		state := "live"
		if t.Revoked() {
			state = "revoked"
		}
		scope := "instance (admin)"
		if t.ProjectID != 0 {
			scope = names[t.ProjectID] + " (" + string(t.Role) + ")"
		}
		tab.row(t.ID, t.Name, scope, t.CreatedAt.Format(time.DateTime), state)
	}
	return tab.flush()
}
