package dashboard

// Per-person upstream accounts (docs/bridge.md, "Each person's own
// account"): a bridged remote MCP server that acts as each caller's own
// account there. People connect their account in the browser: the
// connect page starts the remote's OAuth flow, the callback finishes it,
// and the agent's page and the person's own page list the accounts. No
// page, answer, log line or audit entry carries a token: the service
// returns accounts without them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// Upstream keeps people's upstream accounts for per-person bridged
// remotes: [*upstream.Service].
type Upstream interface {
	// Begin starts connecting and returns the upstream authorization URL
	// to send the person to; its state is bound to userID.
	Begin(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, returnTo string) (string, error)
	// BeginHint says what the operator could change when Begin failed
	// with err (a flag, the network, the remote's set-up).
	BeginHint(err error, resource string) string
	// Complete finishes at the callback for the signed-in userID, stores
	// the account and returns it with the returnTo given to Begin, or
	// what the flow connected before when its callback is opened again.
	Complete(ctx context.Context, userID int64, state, code, iss string) (upstream.Connected, error)
	// Disconnect deletes a person's account; false when there was none.
	Disconnect(ctx context.Context, agentKeyID string, userID int64) (bool, error)
	// Accounts lists accounts, without their tokens.
	Accounts(ctx context.Context, f store.UpstreamFilter) ([]upstream.Account, error)
}

// Audit actions of upstream accounts.
const (
	actionUpstreamConnect    = "upstream.connect"
	actionUpstreamDisconnect = "upstream.disconnect"
)

// upstreamAccountJSON is a connected upstream account as pages and the
// API show it: who, where, when; never a token.
type upstreamAccountJSON struct {
	Project     string    `json:"project"`
	AgentKey    string    `json:"agentKey"`
	Agent       string    `json:"agent"`
	UserID      int64     `json:"userId"`
	Email       string    `json:"email"`
	Host        string    `json:"host"`
	Resource    string    `json:"resource"`
	Subject     string    `json:"subject,omitempty"`
	Scope       string    `json:"scope,omitempty"`
	ExpiresAt   time.Time `json:"expiresAt,omitzero"`
	ConnectedAt time.Time `json:"connectedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// CanDisconnect: the visitor may disconnect it (pages only).
	CanDisconnect bool `json:"-"`
}

// connectableJSON is a per-person agent a person may connect an account to.
type connectableJSON struct {
	Project  string `json:"project"`
	AgentKey string `json:"agentKey"`
	Agent    string `json:"agent"`
	Host     string `json:"host"`
	URL      string `json:"url"` // the gateway's connect page
}

// remoteHost is the host people know a remote by.
func remoteHost(resource string) string {
	if u, err := url.Parse(resource); err == nil && u.Host != "" {
		return u.Host
	}
	return resource
}

// perPerson is what the live registry says of an agent key's per-person
// remote: the first connected replica that declares it, or nil.
func (d *Dashboard) perPerson(projectID int64, agentKeyID string) (*agentproto.PerPerson, *agents.Replica) {
	for _, rep := range d.reg.Replicas(projectID) {
		if rep.AgentKey == agentKeyID && rep.Reg != nil && rep.Reg.Bridge != nil && rep.Reg.Bridge.PerPerson != nil {
			return rep.Reg.Bridge.PerPerson, rep
		}
	}
	return nil, nil
}

// regOf is the registration of a connected replica of the key, or nil.
func (d *Dashboard) regOf(projectID int64, agentKeyID string) *agentproto.Registration {
	for _, rep := range d.reg.Replicas(projectID) {
		if rep.AgentKey == agentKeyID && rep.Reg != nil {
			return rep.Reg
		}
	}
	return nil
}

// connectable lists a project's agents whose connected replicas run in
// connect mode, by agent key.
func (d *Dashboard) connectable(ctx context.Context, p store.Project) ([]connectableJSON, error) {
	seen := map[string]bool{}
	var out []connectableJSON
	for _, rep := range d.reg.Replicas(p.ID) {
		if seen[rep.AgentKey] || rep.Reg == nil || rep.Reg.Bridge == nil || rep.Reg.Bridge.PerPerson == nil {
			continue
		}
		pp := rep.Reg.Bridge.PerPerson
		if pp.Mode != agentproto.PerPersonConnect || pp.URL == "" {
			continue
		}
		seen[rep.AgentKey] = true
		k, err := d.st.Key(ctx, rep.AgentKey)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, connectableJSON{Project: p.Name, AgentKey: k.ID, Agent: access.AgentName(k, rep.Reg),
			Host: remoteHost(pp.URL), URL: "/connect/" + url.PathEscape(k.ID)})
	}
	slices.SortFunc(out, func(a, b connectableJSON) int { return cmp.Compare(a.Agent+a.AgentKey, b.Agent+b.AgentKey) })
	return out, nil
}

// accountsOut turns accounts into what people see, with the names of
// their projects, agents and people.
func (d *Dashboard) accountsOut(ctx context.Context, as []upstream.Account) ([]upstreamAccountJSON, error) {
	out := make([]upstreamAccountJSON, 0, len(as))
	emails := map[int64]string{}
	keys := map[string]store.Key{}
	for _, a := range as {
		email, ok := emails[a.UserID]
		if !ok {
			u, err := d.st.UserByID(ctx, a.UserID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				email = fmt.Sprintf("user %d", a.UserID)
			case err != nil:
				return nil, err
			default:
				email = u.Email
			}
			emails[a.UserID] = email
		}
		k, ok := keys[a.AgentKeyID]
		if !ok {
			var err error
			k, err = d.st.Key(ctx, a.AgentKeyID)
			if errors.Is(err, store.ErrNotFound) {
				k = store.Key{ID: a.AgentKeyID}
			} else if err != nil {
				return nil, err
			}
			keys[a.AgentKeyID] = k
		}
		out = append(out, upstreamAccountJSON{
			Project: k.ProjectName, AgentKey: a.AgentKeyID, Agent: access.AgentName(k, d.regOf(a.ProjectID, a.AgentKeyID)),
			UserID: a.UserID, Email: email, Host: remoteHost(a.Resource), Resource: a.Resource, Subject: a.Subject, Scope: a.Scope,
			ExpiresAt: a.ExpiresAt, ConnectedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
		})
	}
	return out, nil
}

// agentKeyFor loads an agent key the principal may see, with its project
// and p's role there. A key that does not exist, is not an agent key, is
// revoked or belongs to a project p is not in is answered alike.
func (d *Dashboard) agentKeyFor(ctx context.Context, p principal, id string) (store.Key, store.Project, store.Role, error) {
	k, err := d.st.Key(ctx, id)
	if err == nil && k.Kind == store.KindAgent && !k.Revoked() {
		proj, err := d.st.Project(ctx, k.ProjectName)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Key{}, store.Project{}, "", err
		}
		if err == nil {
			role, err := d.roleIn(ctx, p, proj)
			if err != nil {
				return store.Key{}, store.Project{}, "", err
			}
			if role != "" {
				return k, proj, role, nil
			}
		}
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Key{}, store.Project{}, "", err
	}
	return store.Key{}, store.Project{}, "", noAgentKey(id)
}

func noAgentKey(id string) error {
	return errorf(http.StatusNotFound, "There is no agent key %q, or you are not a member of its project. Check the link, or find the agent on its project's Agents page.", id)
}

// errNoUpstream answers while the gateway keeps no upstream accounts.
var errNoUpstream = errorf(http.StatusNotFound, "This gateway keeps no upstream accounts: it runs without per-person bridged servers.")

// upstreamAudit is what the audit log keeps of an upstream account.
func upstreamAudit(agentKey, host, email string) map[string]any {
	return map[string]any{"agentKey": agentKey, "host": host, "user": email}
}

// agentPageData is the page of one agent key: what it is, its replicas
// and, for a per-person bridged remote, the connected accounts.
type agentPageData struct {
	Key      agentKeyJSON
	Replicas []replicaJSON
	Name     string
	// PerPerson is what its connected replicas say of acting as each
	// person; nil when none does (or none is connected).
	PerPerson *agentproto.PerPerson
	Host      string
	// Upstream: the gateway keeps upstream accounts.
	Upstream bool
	Accounts []upstreamAccountJSON
	// Everyone: the visitor sees everyone's accounts, not only their own.
	Everyone bool
	// Connect is the visitor's connect link, when they have no account
	// and the agent takes one.
	Connect string
	// Connected says the visitor's account was just connected (they came
	// back from connecting it).
	Connected string
}

func (d *Dashboard) agentPage(r *http.Request, v *view) (string, error) {
	all, err := d.agentsOf(r.Context(), v.Project.ID)
	if err != nil {
		return "", err
	}
	id := r.PathValue("id")
	i := slices.IndexFunc(all.Keys, func(k agentKeyJSON) bool { return k.ID == id })
	if i < 0 {
		return "", errorf(http.StatusNotFound, "Project %q has no agent key %q. See its Agents page.", v.Project.Name, id)
	}
	data := agentPageData{Key: all.Keys[i], Upstream: d.upstream != nil, Everyone: v.Can("editor")}
	k, err := d.st.Key(r.Context(), id)
	if err != nil {
		return "", err
	}
	data.Name = access.AgentName(k, d.regOf(v.Project.ID, id))
	for _, rep := range all.Replicas {
		if rep.AgentKey == id {
			data.Replicas = append(data.Replicas, rep)
		}
	}
	data.PerPerson, _ = d.perPerson(v.Project.ID, id)
	if data.PerPerson != nil {
		data.Host = remoteHost(data.PerPerson.URL)
	}
	if d.upstream != nil {
		f := store.UpstreamFilter{ProjectID: v.Project.ID, AgentKeyID: id}
		if !data.Everyone {
			f.UserID = v.User.ID
		}
		as, err := d.upstream.Accounts(r.Context(), f)
		if err != nil {
			return "", err
		}
		if data.Accounts, err = d.accountsOut(r.Context(), as); err != nil {
			return "", err
		}
		mine := false
		for i := range data.Accounts {
			self := data.Accounts[i].UserID == v.User.ID
			mine = mine || self
			data.Accounts[i].CanDisconnect = self || data.Everyone
			if self && r.URL.Query().Get("connected") == id {
				data.Connected = justConnected(data.Accounts[i].Host)
			}
		}
		if pp := data.PerPerson; !mine && pp != nil && pp.Mode == agentproto.PerPersonConnect && pp.URL != "" {
			data.Connect = "/connect/" + url.PathEscape(id) + "?return=" + url.QueryEscape(r.URL.Path)
		}
	}
	v.Title, v.Tab, v.Data = data.Name+" · Agents · "+v.Project.Name, "agents", data
	return "agent", nil
}

// meData is the person's own page: their upstream accounts over every
// project they are in, and the per-person agents they could connect.
type meData struct {
	Upstream bool
	Rows     []meRow
	// Connected says an account was just connected.
	Connected string
}

// justConnected is what a page says when the person comes back from
// connecting an account there.
func justConnected(host string) string {
	return fmt.Sprintf("Your %s account is connected. Calls from your MCP client now act as it.", host)
}

// meRow is an account, or an agent not connected yet (Connect set).
type meRow struct {
	upstreamAccountJSON
	Connect string
}

func (d *Dashboard) mePage(r *http.Request, v *view) (string, error) {
	v.Title = "Your accounts"
	data := meData{Upstream: d.upstream != nil}
	v.Data = &data
	if d.upstream == nil {
		return "me", nil
	}
	accounts, connect, err := d.myAccounts(r.Context(), v.User, v.Projects)
	if err != nil {
		return "", err
	}
	for _, a := range accounts {
		a.CanDisconnect = true
		if r.URL.Query().Get("connected") == a.AgentKey {
			data.Connected = justConnected(a.Host)
		}
		data.Rows = append(data.Rows, meRow{upstreamAccountJSON: a})
	}
	for _, c := range connect {
		data.Rows = append(data.Rows, meRow{
			upstreamAccountJSON: upstreamAccountJSON{Project: c.Project, AgentKey: c.AgentKey, Agent: c.Agent, Host: c.Host},
			Connect:             c.URL + "?return=/me",
		})
	}
	slices.SortStableFunc(data.Rows, func(a, b meRow) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(strings.ToLower(a.Agent), strings.ToLower(b.Agent)), cmp.Compare(a.AgentKey, b.AgentKey))
	})
	return "me", nil
}

// myAccounts is a person's connected accounts, and the per-person agents
// of their projects they have not connected an account to (or one the
// secret key file no longer opens).
func (d *Dashboard) myAccounts(ctx context.Context, u store.User, projects []store.Project) ([]upstreamAccountJSON, []connectableJSON, error) {
	all, err := d.upstream.Accounts(ctx, store.UpstreamFilter{UserID: u.ID})
	if err != nil {
		return nil, nil, err
	}
	// An account the key file no longer opens serves nothing: it is
	// offered to connect again, not shown as connected.
	as := slices.DeleteFunc(all, func(a upstream.Account) bool { return a.Unreadable })
	accounts, err := d.accountsOut(ctx, as)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, a := range as {
		have[a.AgentKeyID] = true
	}
	connect := []connectableJSON{}
	for _, p := range projects {
		cs, err := d.connectable(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cs {
			if !have[c.AgentKey] {
				connect = append(connect, c)
			}
		}
	}
	return accounts, connect, nil
}
