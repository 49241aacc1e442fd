package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/dashboard"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/upstream"
)

// remoteURL is the per-person bridged remote of these tests.
const remoteURL = "https://mcp.example.test/mcp"

// flow is the real upstream service, whose Begin and Complete stand in for
// a remote's OAuth (H6's end-to-end test runs a real one): Begin hands out
// an authorization URL whose state names the person, and Complete stores
// the account, sealed, for a code "good" and the person the state names.
type flow struct {
	*upstream.Service
	st  store.Store
	box *secrets.Box

	mu    sync.Mutex
	begun []string // "project key user resource returnTo"
}

type flowState struct {
	User      int64
	Project   int64
	Key       string
	Resource  string
	ReturnTo  string
	AccessTok string
}

func (f *flow) Begin(ctx context.Context, projectID int64, agentKeyID string, userID int64, resource, returnTo string) (string, error) {
	f.mu.Lock()
	f.begun = append(f.begun, fmt.Sprintf("%d %s %d %s %s", projectID, agentKeyID, userID, resource, returnTo))
	f.mu.Unlock()
	b, _ := json.Marshal(flowState{User: userID, Project: projectID, Key: agentKeyID, Resource: resource, ReturnTo: returnTo})
	return "https://auth.example.test/authorize?state=" + base64.RawURLEncoding.EncodeToString(b), nil
}

func (f *flow) Complete(ctx context.Context, userID int64, state, code, iss string) (upstream.Connected, error) {
	b, err := base64.RawURLEncoding.DecodeString(state)
	var s flowState
	if err != nil || json.Unmarshal(b, &s) != nil {
		return upstream.Connected{}, errors.New("bad state")
	}
	if s.User != userID {
		return upstream.Connected{}, errors.New("the state belongs to another person")
	}
	if code != "good" {
		return upstream.Connected{}, errors.New("the token endpoint refused the code")
	}
	a := sealedAccount(f.box, s.Project, s.Key, userID, "at-"+code+"-secret")
	if err := f.st.PutUpstreamAccount(ctx, a); err != nil {
		return upstream.Connected{}, err
	}
	return upstream.Connected{Account: a, ReturnTo: s.ReturnTo}, nil
}

// sealedAccount is an account as the service stores it: tokens sealed.
func sealedAccount(box *secrets.Box, projectID int64, key string, userID int64, access string) store.UpstreamAccount {
	return store.UpstreamAccount{
		ProjectID: projectID, AgentKeyID: key, UserID: userID, Resource: remoteURL,
		Access:    box.Seal([]byte(access), fmt.Sprintf("upstream-access:%s:%d", key, userID)),
		Refresh:   box.Seal([]byte("rt-"+access), fmt.Sprintf("upstream-refresh:%s:%d", key, userID)),
		ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second), Scope: "files:read", ClientID: "client-1",
		Subject: fmt.Sprintf("person-%d", userID),
	}
}

// upstreamEnv is a dashboard with the upstream service, a per-person
// bridged replica of the env's agent key connected, and its flow.
func upstreamEnv(t *testing.T) (*env, *flow) {
	t.Helper()
	box, _, err := secrets.LoadOrCreate(filepath.Join(t.TempDir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	f := &flow{box: box}
	e := newEnvWith(t, func(o *dashboard.Options) {
		st := o.Store.(store.Store)
		f.st = st
		f.Service = upstream.New(upstream.Options{Store: st, Box: box, PublicURL: func() string { return "http://gateway.test" },
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		o.Upstream = f
	})
	e.connectBridge("rep-files", &agentproto.Bridge{Transport: "streamable-http", Target: remoteURL, Server: "files",
		PerPerson: &agentproto.PerPerson{Mode: agentproto.PerPersonConnect, URL: remoteURL}})
	return e, f
}

func (e *env) userID(email string) int64 {
	e.t.Helper()
	u, _, err := e.st.UserByEmail(context.Background(), email)
	if err != nil {
		e.t.Fatal(err)
	}
	return u.ID
}

// put stores an account for a person, as connecting does.
func (e *env) put(f *flow, email, access string) int64 {
	e.t.Helper()
	id := e.userID(email)
	if err := e.st.PutUpstreamAccount(context.Background(), sealedAccount(f.box, e.project.ID, e.agentKey.ID, id, access)); err != nil {
		e.t.Fatal(err)
	}
	return id
}

type accountOut struct {
	Project     string    `json:"project"`
	AgentKey    string    `json:"agentKey"`
	Agent       string    `json:"agent"`
	UserID      int64     `json:"userId"`
	Email       string    `json:"email"`
	Host        string    `json:"host"`
	Resource    string    `json:"resource"`
	Subject     string    `json:"subject"`
	ExpiresAt   time.Time `json:"expiresAt"`
	ConnectedAt time.Time `json:"connectedAt"`
}

type accountsOut struct {
	Accounts []accountOut `json:"accounts"`
	Connect  []struct {
		Project, AgentKey, Agent, Host, URL string
	} `json:"connect"`
}

func emails(as []accountOut) string {
	var out []string
	for _, a := range as {
		out = append(out, a.Email)
	}
	return strings.Join(out, ",")
}

// noToken fails when a JSON answer has a token in it: a field named so,
// or a token's value (every token of these tests ends in "-secret").
func noToken(t *testing.T, what string, body []byte) {
	t.Helper()
	if s := strings.ToLower(string(body)); strings.Contains(s, "token") || strings.Contains(s, "-secret") {
		t.Errorf("%s holds a token: %s", what, body)
	}
}

// noSecret fails when a page shows a token's value.
func noSecret(t *testing.T, what, page string) {
	t.Helper()
	if strings.Contains(page, "-secret") {
		t.Errorf("%s shows a token: %s", what, page)
	}
}

// TestUpstreamAccountsAPI: an editor lists every account of an agent key,
// a viewer only their own; no answer holds a token; a viewer disconnects
// their own account but not another's, an editor anyone's, and each is
// audited without a token.
func TestUpstreamAccountsAPI(t *testing.T) {
	e, f := upstreamEnv(t)
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	editor := e.member(admin, "eve@example.com", store.RoleEditor)
	outsider := e.account("out@example.com")
	vic := e.put(f, "vic@example.com", "at-vic-secret")
	eve := e.put(f, "eve@example.com", "at-eve-secret")
	key := e.agentKey.ID
	list := "/api/upstream-accounts?agentKey=" + key

	var got accountsOut
	res := editor.mustCall(http.StatusOK, "GET", list, nil, &got)
	noToken(t, "the editor's list", res.body)
	if emails(got.Accounts) != "vic@example.com,eve@example.com" && emails(got.Accounts) != "eve@example.com,vic@example.com" {
		t.Errorf("the editor's list = %q; want vic's and eve's", emails(got.Accounts))
	}
	a := got.Accounts[0]
	if a.Host != "mcp.example.test" || a.Resource != remoteURL || a.AgentKey != key || a.Project != "shop" || a.Agent != "orders service" && a.Agent != "files" || a.ExpiresAt.IsZero() || a.ConnectedAt.IsZero() {
		t.Errorf("an account = %+v; want host, resource, key, project, agent and times", a)
	}
	got = accountsOut{}
	res = viewer.mustCall(http.StatusOK, "GET", list, nil, &got)
	noToken(t, "the viewer's list", res.body)
	if emails(got.Accounts) != "vic@example.com" || got.Accounts[0].Subject != fmt.Sprintf("person-%d", vic) {
		t.Errorf("the viewer's list = %+v; want only vic's own", got.Accounts)
	}
	res = outsider.call("GET", list, nil, nil)
	if want := fmt.Sprintf("There is no agent key %q, or you are not a member of its project. Check the link, or find the agent on its project's Agents page.", key); res.StatusCode != http.StatusNotFound || res.apiError() != want {
		t.Errorf("a non-member's list: %d %q; want 404 %q", res.StatusCode, res.apiError(), want)
	}
	if res = editor.call("GET", "/api/upstream-accounts", nil, nil); res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(res.apiError(), "agentKey: ") {
		t.Errorf("a list without agentKey: %d %q; want 400 naming agentKey", res.StatusCode, res.apiError())
	}

	// Mine: my accounts, over every agent.
	got = accountsOut{}
	res = viewer.mustCall(http.StatusOK, "GET", "/api/me/upstream-accounts", nil, &got)
	noToken(t, "my accounts", res.body)
	if emails(got.Accounts) != "vic@example.com" || len(got.Connect) != 0 {
		t.Errorf("vic's own accounts = %+v; want vic's, nothing more to connect", got)
	}
	got = accountsOut{}
	admin.mustCall(http.StatusOK, "GET", "/api/me/upstream-accounts", nil, &got)
	if len(got.Accounts) != 0 || len(got.Connect) != 1 || got.Connect[0].URL != "/connect/"+key || got.Connect[0].Host != "mcp.example.test" {
		t.Errorf("ada's own accounts = %+v; want none, and the agent to connect at /connect/%s", got, key)
	}

	// Disconnecting: not another's as a viewer; one's own; anyone's as an editor.
	res = viewer.call("DELETE", fmt.Sprintf("/api/upstream-accounts/%s?user=%d", key, eve), nil, nil)
	if want := `Disconnecting another person's account needs the editor or owner role in project "shop"; you are a viewer. Ask an owner of the project (its Members page lists them).`; res.StatusCode != http.StatusForbidden || res.apiError() != want {
		t.Errorf("a viewer disconnecting eve: %d %q; want 403 %q", res.StatusCode, res.apiError(), want)
	}
	viewer.mustCall(http.StatusNoContent, "DELETE", "/api/upstream-accounts/"+key, nil, nil)
	editor.mustCall(http.StatusNoContent, "DELETE", fmt.Sprintf("/api/upstream-accounts/%s?user=%d", key, eve), nil, nil)
	res = editor.call("DELETE", fmt.Sprintf("/api/upstream-accounts/%s?user=%d", key, eve), nil, nil)
	if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.apiError(), "That person has no account connected to agent key "+key) {
		t.Errorf("disconnecting twice: %d %q; want 404", res.StatusCode, res.apiError())
	}
	if as, err := e.st.UpstreamAccounts(t.Context(), store.UpstreamFilter{AgentKeyID: key}); err != nil || len(as) != 0 {
		t.Errorf("stored accounts after both disconnected = %d, %v; want none", len(as), err)
	}
	var page auditPage
	res = admin.mustCall(http.StatusOK, "GET", "/api/projects/shop/audit?action=upstream.disconnect", nil, &page)
	noToken(t, "the audit log", res.body)
	if len(page.Entries) != 2 {
		t.Fatalf("upstream.disconnect entries = %+v; want 2", page.Entries)
	}
	sameJSON(t, "eve's disconnect, before", page.Entries[0].Before, fmt.Sprintf(`{"agentKey":%q,"host":"mcp.example.test","user":"eve@example.com"}`, key))
	if page.Entries[0].Actor != "eve@example.com" || page.Entries[1].Actor != "vic@example.com" || page.Entries[0].Target != key || string(page.Entries[0].After) != "null" {
		t.Errorf("upstream.disconnect entries = %+v; want eve's by eve, vic's by vic, on %s", page.Entries, key)
	}
}

// TestUpstreamConnectPages: the connect link sends a person who is not
// signed in to sign in first; a member goes to the remote with a state
// bound to them; the callback stores the account, audits it and says
// what to do next; a cancel, someone else's state and a refused code
// connect nothing.
func TestUpstreamConnectPages(t *testing.T) {
	e, f := upstreamEnv(t)
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	outsider := e.account("out@example.com")
	vic := e.userID("vic@example.com")
	connect := "/connect/" + e.agentKey.ID

	res := e.client().get(connect)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/login?next="+url.QueryEscape(connect) {
		t.Errorf("the connect link, not signed in: %d to %q; want 303 to the sign-in page and back", res.StatusCode, loc)
	}
	res = outsider.get(connect)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), fmt.Sprintf("There is no agent key &#34;%s&#34;, or you are not a member of its project.", e.agentKey.ID)) {
		t.Errorf("the connect link for a non-member: %d; want 404 as for no such key: %s", res.StatusCode, res.text())
	}
	if res = viewer.get("/connect/key_nope"); res.StatusCode != http.StatusNotFound || !strings.Contains(res.text(), `There is no agent key &#34;key_nope&#34;, or you are not a member of its project.`) {
		t.Errorf("the connect link for no such key: %d: %s", res.StatusCode, res.text())
	}

	res = viewer.get(connect)
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || loc == nil || loc.Host != "auth.example.test" {
		t.Fatalf("the connect link: %d to %q; want 303 to the remote's authorization server", res.StatusCode, res.Header.Get("Location"))
	}
	if want := fmt.Sprintf("%d %s %d %s ", e.project.ID, e.agentKey.ID, vic, remoteURL); len(f.begun) != 1 || f.begun[0] != want {
		t.Errorf("Begin calls = %q; want one, %q", f.begun, want)
	}
	state := loc.Query().Get("state")

	// Back from the remote: cancelled, another person's state, a refused code.
	res = viewer.get("/upstream/callback?error=access_denied&state=" + state)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.text(), "The connection was cancelled at the remote server, so no account was connected.") {
		t.Errorf("the callback after a cancel: %d: %s", res.StatusCode, res.text())
	}
	const opaque = "Your account could not be connected. Start again from the link in your MCP client or from your accounts page; if it fails again, the gateway&#39;s log says why."
	if res = admin.get("/upstream/callback?code=good&state=" + state); res.StatusCode != http.StatusBadRequest || !strings.Contains(res.text(), opaque) {
		t.Errorf("the callback with vic's state in ada's browser: %d: %s", res.StatusCode, res.text())
	}
	if res = viewer.get("/upstream/callback?code=bad&state=" + state); res.StatusCode != http.StatusBadRequest || !strings.Contains(res.text(), opaque) {
		t.Errorf("the callback with a refused code: %d: %s", res.StatusCode, res.text())
	}
	if as, _ := e.st.UpstreamAccounts(t.Context(), store.UpstreamFilter{AgentKeyID: e.agentKey.ID}); len(as) != 0 {
		t.Fatalf("accounts after a cancel and two failures = %d; want none", len(as))
	}

	res = viewer.get("/upstream/callback?code=good&iss=https%3A%2F%2Fauth.example.test&state=" + state)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.text(), "Your mcp.example.test account is connected. Go back to your MCP client and call the tool again.") ||
		!strings.Contains(res.text(), `href="/me"`) {
		t.Errorf("the callback: %d: %s", res.StatusCode, res.text())
	}
	noSecret(t, "the connected page", res.text())
	if as, _ := e.st.UpstreamAccounts(t.Context(), store.UpstreamFilter{AgentKeyID: e.agentKey.ID}); len(as) != 1 || as[0].UserID != vic {
		t.Errorf("accounts after connecting = %+v; want vic's", as)
	}
	en := only(t, admin, "shop", "upstream.connect")
	sameJSON(t, "upstream.connect, after", en.After, fmt.Sprintf(`{"agentKey":%q,"host":"mcp.example.test","user":"vic@example.com"}`, e.agentKey.ID))
	if en.Actor != "vic@example.com" || en.Target != e.agentKey.ID {
		t.Errorf("upstream.connect = %+v; want by vic, on the agent key", en)
	}

	// From the dashboard: back to the page it started on.
	res = viewer.get(connect + "?return=/me")
	loc, _ = url.Parse(res.Header.Get("Location"))
	res = viewer.get("/upstream/callback?code=good&state=" + loc.Query().Get("state"))
	back := "/me?connected=" + e.agentKey.ID
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != back {
		t.Errorf("the callback of a connect started on /me: %d to %q; want 303 to %s", res.StatusCode, res.Header.Get("Location"), back)
	}
	if res = viewer.get(back); !strings.Contains(res.text(), "Your mcp.example.test account is connected. Calls from your MCP client now act as it.") {
		t.Errorf("/me after connecting does not say so: %s", res.text())
	}
	if res = outsider.get(back); strings.Contains(res.text(), "is connected") {
		t.Errorf("/me of someone who connected nothing says an account is connected: %s", res.text())
	}
	if res = viewer.get(connect + "?return=https://evil.example/"); res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(f.begun[len(f.begun)-1], remoteURL+" ") {
		t.Errorf("Begin for a return elsewhere = %q; want no returnTo", f.begun[len(f.begun)-1])
	}

	// No replica: the bridge is not running.
	e.reg.Remove(e.reg.Replicas(e.project.ID)[0])
	res = viewer.get(connect)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(res.text(), "The bridge for orders service is not running, so its account cannot be connected now. Ask its operator to start it, then try again.") {
		t.Errorf("the connect link with the bridge stopped: %d: %s", res.StatusCode, res.text())
	}
}

// TestUpstreamAgentPage: the agent's page lists who connected, for an
// editor everyone and for a viewer themself, with Disconnect where they
// may, and a Connect link for whoever has no account.
func TestUpstreamAgentPage(t *testing.T) {
	e, f := upstreamEnv(t)
	admin := e.admin()
	viewer := e.member(admin, "vic@example.com", store.RoleViewer)
	e.member(admin, "eve@example.com", store.RoleEditor)
	e.put(f, "eve@example.com", "at-eve-secret")
	page := "/p/shop/agents/" + e.agentKey.ID

	res := admin.get(page)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.text(), "eve@example.com") || !strings.Contains(res.text(), `data-api="DELETE /api/upstream-accounts/`+e.agentKey.ID+`?user=`) {
		t.Errorf("the agent page for ada: %d: want eve's account with Disconnect: %s", res.StatusCode, res.text())
	}
	if !strings.Contains(res.text(), `href="/connect/`+e.agentKey.ID+`?return=%2Fp%2Fshop%2Fagents%2F`+e.agentKey.ID+`"`) {
		t.Errorf("the agent page for ada has no Connect link back to it: %s", res.text())
	}
	noSecret(t, "the agent page", res.text())
	res = viewer.get(page)
	if strings.Contains(res.text(), "eve@example.com") || !strings.Contains(res.text(), "You have not connected an account yet.") {
		t.Errorf("the agent page for a viewer shows others' accounts: %s", res.text())
	}
	if res = admin.get("/p/shop/agents"); !strings.Contains(res.text(), `href="/p/shop/agents/`+e.agentKey.ID+`#accounts"`) {
		t.Errorf("the Agents page links no Connected accounts: %s", res.text())
	}
}
