package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/auth"
	"github.com/spacefix/spacefix/internal/store"
)

func keys(ctx context.Context, args []string, stdout io.Writer) error {
	return dispatch(ctx, "keys", args, stdout,
		command{"create", keysCreate}, command{"list", keysList}, command{"set", keysSet}, command{"revoke", keysRevoke})
}

func keysCreate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("keys create", stdout)
	data := dataFlag(fs)
	project := fs.String("project", "default", "the project `name`")
	kind := fs.String("kind", "", "agent or client (required)")
	name := fs.String("name", "", "a `label` for people")
	readOnly := fs.Bool("read-only", false, "client key sees and calls only tools that count as reads")
	tools := fs.String("tools", "", "client key may use only these tools (comma-separated `names`)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *kind != store.KindAgent && *kind != store.KindClient {
		return usageError{fmt.Sprintf("keys create: --kind must be agent or client, not %q", *kind)}
	}
	if *kind == store.KindAgent && (*readOnly || *tools != "") {
		return usageError{"keys create: --read-only and --tools apply to client keys only"}
	}
	var allow []string
	for _, t := range strings.Split(*tools, ",") {
		if t = strings.TrimSpace(t); t != "" {
			allow = append(allow, t)
		}
	}
	return withStore(ctx, *data, func(st store.Store) error {
		p, err := st.Project(ctx, *project)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no project %q; create it with: spacefix projects create %s", *project, *project)
		}
		if err != nil {
			return err
		}
		k, secret, err := auth.CreateKey(ctx, st, store.Key{ProjectID: p.ID, Kind: *kind, Name: *name, ReadOnly: *readOnly, Tools: allow})
		if err != nil {
			return err
		}
		cliAudit(ctx, st, p.ID, "key.create", k.ID, nil, store.KeyAudit(k))
		if *asJSON {
			return json.NewEncoder(stdout).Encode(map[string]any{"id": k.ID, "key": secret, "kind": k.Kind, "project": p.Name})
		}
		fmt.Fprintf(stdout, "Created %s key %s in project %q.\nSave it now; it cannot be shown again:\n\n  %s\n", k.Kind, k.ID, p.Name, secret)
		return nil
	})
}

func keysList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("keys list", stdout)
	data := dataFlag(fs)
	project := fs.String("project", "", "only keys of this project `name`")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	return withStore(ctx, *data, func(st store.Store) error {
		var pid int64
		if *project != "" {
			p, err := st.Project(ctx, *project)
			if err != nil {
				return fmt.Errorf("project %q: %w", *project, err)
			}
			pid = p.ID
		}
		ks, err := st.Keys(ctx, pid)
		if err != nil {
			return err
		}
		if *asJSON {
			return printEach(stdout, ks, false, func(k store.Key) any {
				m := map[string]any{
					"id": k.ID, "project": k.ProjectName, "kind": k.Kind, "name": k.Name,
					"readOnly": k.ReadOnly, "tools": k.Tools, "createdAt": k.CreatedAt, "revoked": k.Revoked(),
				}
				if k.IdentityAudience != "" {
					m["identityAudience"] = k.IdentityAudience
				}
				return m
			})
		}
		t := newTable(stdout, "ID", "PROJECT", "KIND", "NAME", "ACCESS", "CREATED", "STATE")
		for _, k := range ks {
			access := "read and write"
			if k.ReadOnly {
				access = "read only"
			}
			if len(k.Tools) > 0 {
				access += "; tools " + strings.Join(k.Tools, ",")
			}
			if k.Kind == store.KindAgent {
				access = "-"
			}
			state := "live"
			if k.Revoked() {
				state = "revoked"
			}
			t.row(k.ID, k.ProjectName, k.Kind, k.Name, access, k.CreatedAt.Format(time.DateTime), state)
		}
		return t.flush()
	})
}

// keysSet changes a setting of an agent key: --identity-audience gives
// every call to its replicas a signed identity token with that audience
// ("" turns them off; docs/identity.md). Running gateways apply it within
// a second. With --url or --token it goes through a gateway's admin API,
// as tools set does, for a person who has a token but not the store.
func keysSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("keys set", stdout)
	client := apiFlags(fs)
	data := fs.Lookup("data")
	var aud *string
	fs.Func("identity-audience", "the `audience` of the identity tokens every call to the agent key's replicas carries; \"\" turns them off", func(v string) error {
		v = strings.TrimSpace(v)
		aud = &v
		return store.CheckIdentityAudience(v)
	})
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"keys set: want one agent key ID (see spacefix keys list)"}
	}
	if aud == nil {
		return usageError{"keys set: nothing to set; pass --identity-audience AUDIENCE (\"\" turns identity tokens off)"}
	}
	given := setFlags(fs)
	if given["url"] || given["token"] {
		c, err := client()
		if err != nil {
			return err
		}
		err = c.do(ctx, "PATCH", c.projectPath("/agent-keys/%s", url.PathEscape(pos[0])), map[string]string{"identityAudience": *aud}, nil)
		if err != nil {
			return apiFieldFlags(err, map[string]string{"identityAudience": "identity-audience"})
		}
		fmt.Fprintf(stdout, "%s: %s. Running gateways apply it within a second.\n", pos[0], identityState(*aud))
		return nil
	}
	project := ""
	if given["project"] {
		project = fs.Lookup("project").Value.String()
	}
	return withStore(ctx, data.Value.String(), func(st store.Store) error {
		k, err := projectKey(ctx, st, pos[0], project)
		if err != nil {
			return err
		}
		if k.Kind != store.KindAgent {
			return fmt.Errorf("%s is a client key; identity tokens go to agents: pass an agent key's ID (see spacefix keys list)", k.ID)
		}
		if k.IdentityAudience == *aud {
			fmt.Fprintf(stdout, "%s: %s; nothing changed.\n", k.ID, identityState(*aud))
			return nil
		}
		if err := st.SetKeyIdentityAudience(ctx, k.ID, *aud); err != nil {
			return err
		}
		cliAudit(ctx, st, k.ProjectID, "key.identity", k.ID,
			map[string]any{"identityAudience": k.IdentityAudience}, map[string]any{"identityAudience": *aud})
		fmt.Fprintf(stdout, "%s: %s. Running gateways apply it within a second.\n", k.ID, identityState(*aud))
		return nil
	})
}

// projectKey loads the key id; when project is not "", the key must be
// one of that project's.
func projectKey(ctx context.Context, st store.Store, id, project string) (store.Key, error) {
	k, err := st.Key(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return k, fmt.Errorf("no key %q; see spacefix keys list", id)
	} else if err != nil {
		return k, err
	}
	if project != "" && k.ProjectName != project {
		return k, fmt.Errorf("project %q has no key %q; see spacefix keys list --project %s", project, id, shellQuote(project))
	}
	return k, nil
}

// identityState says what an agent key's calls carry with audience aud.
func identityState(aud string) string {
	if aud == "" {
		return "no identity tokens"
	}
	return fmt.Sprintf("every call carries an identity token for audience %q", aud)
}

func keysRevoke(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("keys revoke", stdout)
	data := dataFlag(fs)
	project := fs.String("project", "", "the project `name` the key belongs to; a key of another project is refused")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{"keys revoke: want one key ID (see spacefix keys list)"}
	}
	return withStore(ctx, *data, func(st store.Store) error {
		k, err := projectKey(ctx, st, pos[0], *project)
		if err != nil {
			return err
		}
		if k.Revoked() {
			fmt.Fprintf(stdout, "%s was already revoked on %s UTC; nothing changed.\n", k.ID, k.RevokedAt.UTC().Format("2006-01-02 15:04"))
			return nil
		}
		if err := st.RevokeKey(ctx, k.ID); err != nil {
			return err
		}
		after := store.KeyAudit(k)
		after["revoked"] = true
		cliAudit(ctx, st, k.ProjectID, "key.revoke", k.ID, store.KeyAudit(k), after)
		fmt.Fprintf(stdout, "Revoked %s. Running gateways refuse it within a second.\n", pos[0])
		return nil
	})
}

func projects(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("projects", args, "create", "list"); err != nil {
		return err
	}
	fs := newFlagSet("projects "+args[0], stdout)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		if len(pos) != 1 {
			return usageError{"projects create: want one project name"}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			p, err := st.CreateProject(ctx, pos[0])
			if errors.Is(err, store.ErrExists) {
				return fmt.Errorf("a project named %q exists already", pos[0])
			}
			if err != nil {
				return err
			}
			cliAudit(ctx, st, p.ID, "project.create", p.Name, nil, map[string]any{"name": p.Name})
			if *asJSON {
				return json.NewEncoder(stdout).Encode(map[string]any{"id": p.ID, "name": p.Name})
			}
			fmt.Fprintf(stdout, "Created project %q. Give it keys with:\n", p.Name)
			for _, kind := range []string{store.KindAgent, store.KindClient} {
				fmt.Fprintf(stdout, "  spacefix keys create --project %s --kind %s\n", shellQuote(p.Name), kind)
			}
			return nil
		})
	default: // "list"; subcommand checked the name
		return withStore(ctx, *data, func(st store.Store) error {
			ps, err := st.Projects(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printEach(stdout, ps, false, func(p store.Project) any {
					return map[string]any{"id": p.ID, "name": p.Name, "createdAt": p.CreatedAt}
				})
			}
			t := newTable(stdout, "NAME", "CREATED")
			for _, p := range ps {
				t.row(p.Name, p.CreatedAt.Format(time.DateTime))
			}
			return t.flush()
		})
	}
}

// withStore opens the store for one command and closes it after.
func withStore(ctx context.Context, path string, fn func(store.Store) error) error {
	st, err := openStore(ctx, path)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(st)
}
