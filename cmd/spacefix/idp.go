package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/oauth"
	"github.com/spacefix/spacefix/internal/store"
)

// listFlag collects a repeated flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// idpCmd manages the identity providers whose ID-JAGs the gateway's
// authorization server accepts (enterprise sign-in), on the store, like
// tokens: an admin sets this up before any browser is involved.
func idpCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("idp", args, "add", "list", "remove"); err != nil {
		return err
	}
	fs := newFlagSet("idp "+args[0], stdout)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON (list)")
	issuer := fs.String("issuer", "", "the identity provider's issuer `URL`, exactly as its tokens carry it (add)")
	jwks := fs.String("jwks-uri", "", "where its signing keys are (add; default: the jwks_uri of its metadata)")
	provision := fs.String("provision", "", "`PROJECT:ROLE`: the project its people reach, and the role people the gateway does not know yet are created with there (add)")
	var clients listFlag
	fs.Var(&clients, "allowed-client", "a `CLIENT_ID` its grants may be presented by; repeat for several (add; default: any registered client)")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "add":
		if len(pos) > 0 {
			return usageError{"idp add: takes no arguments; name the provider with --issuer URL"}
		}
		if *issuer == "" {
			return usageError{"idp add: --issuer URL is required, e.g. --issuer https://acme.okta.com"}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			return idpAdd(ctx, st, store.IdP{Issuer: *issuer, JWKSURI: *jwks, AllowedClients: clients}, *provision, stdout)
		})
	case "list":
		return withStore(ctx, *data, func(st store.Store) error { return idpList(ctx, st, *asJSON, stdout) })
	default: // "remove"; subcommand checked the name
		if len(pos) != 1 {
			return usageError{"idp remove: want one issuer URL (see spacefix idp list)"}
		}
		return withStore(ctx, *data, func(st store.Store) error {
			p, err := st.IdP(ctx, pos[0])
			if err == nil {
				err = st.DeleteIdP(ctx, pos[0])
			}
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no trusted identity provider %s; see spacefix idp list", pos[0])
			}
			if err != nil {
				return err
			}
			cliAudit(ctx, st, 0, "idp.remove", p.Issuer, store.IdPAudit(p, projectName(ctx, st, p.ProvisionProjectID)), nil)
			fmt.Fprintf(stdout, "Removed %s. Its ID-JAGs are refused from now on; tokens already issued run out within the hour.\n", p.Issuer)
			return nil
		})
	}
}

func idpAdd(ctx context.Context, st store.Store, p store.IdP, provision string, stdout io.Writer) error {
	var project string
	if provision != "" {
		name, role, ok := strings.Cut(provision, ":")
		if !ok || name == "" || role == "" {
			return usageError{fmt.Sprintf("idp add: --provision wants PROJECT:ROLE, e.g. --provision shop:viewer, not %q", provision)}
		}
		pr, err := st.Project(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no project %q; see spacefix projects list", name)
		}
		if err != nil {
			return err
		}
		p.ProvisionProjectID, p.ProvisionRole, project = pr.ID, store.Role(role), name
	}
	p, err := oauth.CheckIdP(p)
	if err != nil {
		return usageError{"idp add: " + err.Error()}
	}
	created, err := st.CreateIdP(ctx, p)
	if errors.Is(err, store.ErrExists) {
		return fmt.Errorf("%s is trusted already; remove it first to change it: spacefix idp remove %s", p.Issuer, p.Issuer)
	}
	if err != nil {
		return err
	}
	cliAudit(ctx, st, 0, "idp.add", p.Issuer, nil, store.IdPAudit(created, project))
	fmt.Fprintf(stdout, "Trusted %s. MCP clients may now present its ID-JAGs at /oauth/token (grant_type %s).\n", p.Issuer, oauth.GrantJWTBearer)
	if project != "" {
		fmt.Fprintf(stdout, "Its people reach project %s; people the gateway does not know yet join it as %s.\n", project, p.ProvisionRole)
	}
	return nil
}

func idpList(ctx context.Context, st store.Store, asJSON bool, stdout io.Writer) error {
	ps, err := st.IdPs(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]map[string]any, 0, len(ps))
		for _, p := range ps {
			m := store.IdPAudit(p, projectName(ctx, st, p.ProvisionProjectID))
			m["createdAt"] = p.CreatedAt
			out = append(out, m)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(ps) == 0 {
		fmt.Fprintln(stdout, "No trusted identity providers. Add one with: spacefix idp add --issuer URL")
		return nil
	}
	t := newTable(stdout, "ISSUER", "CLIENTS", "PROVISION", "SINCE")
	for _, p := range ps {
		clients, prov := "any", "-"
		if len(p.AllowedClients) > 0 {
			clients = strings.Join(p.AllowedClients, ",")
		}
		if p.ProvisionProjectID != 0 {
			prov = projectName(ctx, st, p.ProvisionProjectID) + ":" + string(p.ProvisionRole)
		}
		t.row(p.Issuer, clients, prov, p.CreatedAt.Format(time.DateTime))
	}
	return t.flush()
}

// projectName is a project's name, or "" when it has none (0, or gone).
func projectName(ctx context.Context, st store.Projects, id int64) string {
	if id == 0 {
		return ""
	}
	p, err := st.ProjectByID(ctx, id)
	if err != nil {
		return ""
	}
	return p.Name
}
