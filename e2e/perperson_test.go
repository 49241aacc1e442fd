package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/bridge"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
)

// TestPerPersonConnect is issue 28's judged scenario in connect mode. A
// remote MCP server behind a real OAuth server (another gateway, whose
// whoami says the calling person's email) is bridged per person into the
// front. A key is refused with the sentence that says why; a person with
// no account gets the connect page as a URL elicitation or, from a client
// that cannot show one, as a link in a tool error. alice and bob connect
// their own accounts in the browser; then each call reaches the remote as
// its caller, at every protocol version and when both call at once. The
// stored tokens are sealed, and an expiring or dropped token is refreshed.
func TestPerPersonConnect(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice, bob, carol := w.person("alice", true), w.person("bob", true), w.person("carol", false)

	t.Run("key", func(t *testing.T) {
		forEachVersion(t, func(t *testing.T, v string) {
			r := call(t, w.front.connect(v, w.front.clientKey, nil), w.tool, map[string]any{})
			if !r.IsError || text(r) != w.refusal() {
				t.Errorf("a key's call = %v %q; want the error %q", r.IsError, text(r), w.refusal())
			}
		})
	})

	t.Run("no account", func(t *testing.T) {
		forEachVersion(t, func(t *testing.T, v string) {
			r := call(t, w.session(carol, v, nil), w.tool, map[string]any{})
			if !r.IsError || text(r) != w.linkSentence() {
				t.Errorf("carol's call = %v %q; want the error %q", r.IsError, text(r), w.linkSentence())
			}
			if v < "2025-11-25" {
				return // URL elicitation came with 2025-11-25
			}
			cs := w.session(carol, v, urlElicitation)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
			w.wantElicitation(t, res, err)
		})
	})

	// The connect page needs a dashboard session: the sign-in page first.
	if status, loc, _ := browse(t, w.connectURL(), ""); status != 303 || !strings.HasPrefix(loc, "/login?next=") {
		t.Errorf("GET /connect signed out = %d to %q; want 303 to the sign-in page", status, loc)
	}
	w.connectAccount(alice, nil)
	w.connectAccount(bob, nil)

	t.Run("each their own", func(t *testing.T) {
		for _, v := range versions {
			for _, p := range []*ppPerson{alice, bob} {
				if got := w.whoami(t, w.session(p, v, urlElicitation)); got != p.email {
					t.Errorf("%s's whoami at %s = %q", p.email, v, got)
				}
			}
		}
		// Through go-sdk's own OAuth client: registration, alice's consent
		// on the front's dashboard, PKCE.
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			cs, err := alice.front.oauthClient(v)
			if err != nil {
				t.Fatalf("alice's go-sdk OAuth client at %s: %v", v, err)
			}
			if got := w.whoami(t, cs); got != alice.email {
				t.Errorf("alice's whoami through go-sdk's OAuth client at %s = %q", v, got)
			}
		}
		// Both at once, in sessions of both eras: never the other's token.
		var wg sync.WaitGroup
		for _, p := range []*ppPerson{alice, bob} {
			for _, v := range []string{"2025-11-25", "2026-07-28"} {
				cs := w.session(p, v, nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 8 {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
						cancel()
						if err != nil || r.IsError || text(r) != p.email {
							t.Errorf("%s's whoami at %s among others' = %v, %v; want %q", p.email, v, r, err, p.email)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		// carol still has no account.
		if r := call(t, w.session(carol, "2025-11-25", nil), w.tool, map[string]any{}); text(r) != w.linkSentence() {
			t.Errorf("carol's call after alice and bob connected = %q", text(r))
		}
	})

	t.Run("reads, prompts and completions", func(t *testing.T) {
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			read, got, rerr, gerr := readWho(w.session(alice, v, nil))
			if read != alice.email || got != alice.email || rerr != nil || gerr != nil {
				t.Errorf("alice's read and prompt at %s = %q %q (%v, %v)", v, read, got, rerr, gerr)
			}
			if got, err := completeWho(w.session(alice, v, nil)); got != alice.email {
				t.Errorf("alice's completion at %s = %q (%v)", v, got, err)
			}
			key := w.front.connect(v, w.front.clientKey, nil)
			read, got, rerr, gerr = readWho(key)
			if rpcMessage(rerr) != w.refusalOf("who://me") || rpcMessage(gerr) != w.refusalOf("up__whoami_prompt") {
				t.Errorf("a key's read and prompt at %s = %q %q (%v, %v); want JSON-RPC errors with the refusal", v, read, got, rerr, gerr)
			}
			if got, err := completeWho(key); rpcMessage(err) != w.refusalOf("up__whoami_prompt") {
				t.Errorf("a key's completion at %s = %q, %v; want a JSON-RPC error with the refusal", v, got, err)
			}
			link := fmt.Sprintf("Connect your %s account to use who://me: open %s, sign in there, then call who://me again.", w.host, w.connectURL())
			if _, _, rerr, _ := readWho(w.session(carol, v, nil)); rpcMessage(rerr) != link {
				t.Errorf("carol's read at %s: %v; want a JSON-RPC error %q", v, rerr, link)
			}
		}
	})

	t.Run("sealed at rest", func(t *testing.T) {
		if w.front.dataPath == "" {
			t.Skip("reads the front's SQLite file; TestPerPersonAcrossGateways opens a token on PostgreSQL")
		}
		row := w.rawAccountRow(alice)
		box := w.box()
		access := w.accessToken(box, alice)
		if !strings.HasPrefix(access, "sfx_oat_") {
			t.Fatalf("alice's stored access token opens to %.8s…; want a token of the remote", access)
		}
		for col, v := range row {
			if strings.Contains(v, access) || strings.Contains(v, "sfx_oat_") || strings.Contains(v, "sfx_ort_") {
				t.Errorf("column %s of alice's row holds a token in plain", col)
			}
		}
		// The sealed value is of no use under another key, and the plain
		// one is alice's at the remote.
		other, err := secrets.Load(writeKeyFile(t))
		must(t, err)
		if _, err := other.Open(w.account(alice).Access, fmt.Sprintf("upstream-access:%s:%d", w.keyID, alice.id)); err == nil {
			t.Errorf("alice's access token opens with another key")
		}
		if st := mcpStatus(t, w.up, access); st != 200 {
			t.Errorf("the remote answers alice's stored token with %d; want 200", st)
		}
	})

	t.Run("refresh", func(t *testing.T) {
		cs := w.session(alice, "2025-11-25", nil)
		// Expiring within a minute: refreshed before the call.
		before, refreshes := w.expireSoon(alice), w.upSt.refreshes.Load()
		if got := w.whoami(t, cs); got != alice.email {
			t.Errorf("alice's whoami with an expiring token = %q", got)
		}
		if n := w.upSt.refreshes.Load(); n != refreshes+1 {
			t.Errorf("the remote saw %d refresh grants; want 1", n-refreshes)
		}
		after := w.account(alice)
		if !after.ExpiresAt.After(time.Now().Add(30*time.Minute)) || after.Version <= before.Version || string(after.Access) == string(before.Access) {
			t.Errorf("alice's account after the refresh: expires %v, version %d (was %d); want an hour's token, stored anew", after.ExpiresAt, after.Version, before.Version)
		}

		// Expiring, and six of alice's calls at once: one refresh.
		sessions := []*mcp.ClientSession{}
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			for range 3 {
				sessions = append(sessions, w.session(alice, v, nil))
			}
		}
		w.expireSoon(alice)
		refreshes = w.upSt.refreshes.Load()
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
				if err != nil || r.IsError || text(r) != alice.email {
					t.Errorf("one of alice's simultaneous calls with an expiring token = %v, %v", r, err)
				}
			}()
		}
		wg.Wait()
		if n := w.upSt.refreshes.Load(); n != refreshes+1 {
			t.Errorf("the remote saw %d refresh grants for six simultaneous calls; want 1", n-refreshes)
		}

		// Dropped by the remote before its time: the remote answers 401,
		// the front refreshes and delivers the call once more; the client
		// sees alice, never the -32044 in between.
		box := w.box()
		dropped := w.dropToken(t, cs, alice)
		refreshes = w.upSt.refreshes.Load()
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			if got := w.whoami(t, w.session(alice, v, nil)); got != alice.email {
				t.Errorf("alice's whoami at %s after the remote dropped her token = %q", v, got)
			}
		}
		if n := w.upSt.refreshes.Load(); n != refreshes+1 {
			t.Errorf("the remote saw %d refresh grants after it dropped alice's token; want 1", n-refreshes)
		}
		if now := w.accessToken(box, alice); now == dropped {
			t.Errorf("alice's stored token is still the one the remote dropped")
		}
		if got := w.whoami(t, w.session(bob, "2026-07-28", nil)); got != bob.email {
			t.Errorf("bob's whoami after alice's refreshes = %q", got)
		}

		// A read and a prompt get whose token the remote dropped are
		// delivered once more too.
		cs = w.session(alice, "2025-11-25", nil)
		w.dropToken(t, cs, alice)
		refreshes = w.upSt.refreshes.Load()
		if read, got, rerr, gerr := readWho(cs); read != alice.email || got != alice.email {
			t.Errorf("alice's read and prompt after the remote dropped her token = %q %q (%v, %v)", read, got, rerr, gerr)
		}
		if n := w.upSt.refreshes.Load(); n != refreshes+1 {
			t.Errorf("the remote saw %d refresh grants for the read and the get; want 1", n-refreshes)
		}
	})

	t.Run("listed and audited", func(t *testing.T) {
		var got struct {
			Accounts []struct {
				Email, Host, Resource string
				ExpiresAt             time.Time
			}
		}
		admin := w.front.adminToken()
		apiGet(t, w.front, admin, "/api/upstream-accounts?agentKey="+w.keyID, &got)
		var emails []string
		for _, a := range got.Accounts {
			emails = append(emails, a.Email)
			if a.Host != w.host || a.Resource != w.up.url+"/mcp" || a.ExpiresAt.IsZero() {
				t.Errorf("account %+v; want host %s, resource %s/mcp and an expiry", a, w.host, w.up.url)
			}
		}
		slices.Sort(emails)
		if strings.Join(emails, ",") != alice.email+","+bob.email {
			t.Errorf("the agent's connected accounts = %v; want alice's and bob's", emails)
		}
		status, _, page := browse(t, w.front.url+"/me", alice.front.session)
		if status != http.StatusOK || !strings.Contains(page, w.host) || strings.Contains(page, "sfx_oat_") {
			t.Errorf("alice's page of her accounts does not name %s, or holds a token\n%s", w.host, page)
		}
		// Her own list, with her dashboard session.
		status, _, body := browse(t, w.front.url+"/api/me/upstream-accounts", alice.front.session)
		var mine struct {
			Accounts []struct{ Email, AgentKey string }
		}
		if err := json.Unmarshal([]byte(body), &mine); status != http.StatusOK || err != nil || len(mine.Accounts) != 1 ||
			mine.Accounts[0].Email != alice.email || mine.Accounts[0].AgentKey != w.keyID || strings.Contains(body, "sfx_o") {
			t.Errorf("GET /api/me/upstream-accounts as alice = %d %s; want her one account and no token", status, body)
		}
		// The agent's page, as alice (an editor) sees it: both accounts.
		status, _, page = browse(t, w.front.url+"/p/"+w.front.project.Name+"/agents/"+w.keyID, alice.front.session)
		if status != http.StatusOK || !strings.Contains(page, alice.email) || !strings.Contains(page, bob.email) || strings.Contains(page, "sfx_o") {
			t.Errorf("the agent's page = %d; want alice's and bob's accounts and no token\n%s", status, page)
		}
		entries, err := w.front.store.Audit(context.Background(), store.AuditFilter{ProjectID: w.front.project.ID, Action: "upstream.connect"})
		must(t, err)
		var actors []string
		for _, e := range entries {
			actors = append(actors, e.Actor)
			if strings.Contains(fmt.Sprintf("%s %s %s", e.Target, e.Before, e.After), "sfx_o") {
				t.Errorf("an upstream.connect entry holds a token")
			}
		}
		slices.Sort(actors)
		if strings.Join(actors, ",") != alice.email+","+bob.email {
			t.Errorf("upstream.connect audited for %v; want alice and bob", actors)
		}
	})

	t.Run("revoked at the remote", func(t *testing.T) {
		// The remote's administrator disconnects bob's grant: his next call
		// is refused upstream, the refresh too, and bob is asked to connect
		// again; the front forgets the account.
		var grant string
		grants, err := w.up.store.OAuthGrants(context.Background(), w.up.project.ID)
		must(t, err)
		for _, g := range grants {
			if g.UserEmail == bob.email {
				grant = g.ID
			}
		}
		if grant == "" {
			t.Fatalf("the remote has no grant of bob's: %+v", grants)
		}
		apiPost(t, w.up, w.up.adminToken(), "/api/projects/"+w.up.project.Name+"/apps/"+grant+"/revoke", http.StatusNoContent)
		want := fmt.Sprintf("Your %s account needs connecting again: open %s, sign in there, then call %s again.", w.host, w.connectURL(), w.tool)
		if r := call(t, w.session(bob, "2025-11-25", nil), w.tool, map[string]any{}); !r.IsError || text(r) != want {
			t.Errorf("bob's call after the remote revoked his grant = %v %q; want %q", r.IsError, text(r), want)
		}
		if _, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, bob.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("bob's account after the remote refused to refresh it: %v; want it gone", err)
		}
		cs := w.session(bob, "2026-07-28", urlElicitation)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
		w.wantElicitation(t, res, err)
		w.connectAccount(bob, nil)
		if got := w.whoami(t, cs); got != bob.email {
			t.Errorf("bob's whoami after connecting again = %q", got)
		}
		if got := w.whoami(t, w.session(alice, "2025-11-25", nil)); got != alice.email {
			t.Errorf("alice's whoami after bob's grant went = %q", got)
		}
	})

	t.Run("removed", func(t *testing.T) {
		req, _ := http.NewRequest("DELETE", fmt.Sprintf("%s/api/projects/%s/members/%d", w.front.url, w.front.project.Name, bob.id), nil)
		req.Header.Set("Authorization", "Bearer "+w.front.adminToken())
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("removing bob = %d", resp.StatusCode)
		}
		if _, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, bob.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("bob's account after he left the project: %v; want it gone", err)
		}
		w.account(alice)

		// A person deleted from the gateway: their accounts go too.
		eve := w.person("eve", true)
		w.connectAccount(eve, nil)
		req, _ = http.NewRequest("DELETE", fmt.Sprintf("%s/api/users/%d", w.front.url, eve.id), nil)
		req.Header.Set("Authorization", "Bearer "+w.front.adminToken())
		resp, err = http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("deleting eve = %d", resp.StatusCode)
		}
		if _, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, eve.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("eve's account after she was deleted: %v; want it gone", err)
		}
	})

	t.Run("disconnected", func(t *testing.T) {
		req, _ := http.NewRequest("DELETE", fmt.Sprintf("%s/api/upstream-accounts/%s?user=%d", w.front.url, w.keyID, alice.id), nil)
		req.Header.Set("Authorization", "Bearer "+w.front.adminToken())
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			t.Fatalf("disconnecting alice's account = %d %s", resp.StatusCode, body)
		}
		if strings.Contains(string(body), "sfx_o") {
			t.Errorf("the disconnect answer holds a token: %s", body)
		}
		if r := call(t, w.session(alice, "2026-07-28", nil), w.tool, map[string]any{}); !r.IsError || text(r) != w.linkSentence() {
			t.Errorf("alice's call after her account was disconnected = %v %q; want %q", r.IsError, text(r), w.linkSentence())
		}
		entries, err := w.front.store.Audit(context.Background(), store.AuditFilter{ProjectID: w.front.project.ID, Action: "upstream.disconnect"})
		must(t, err)
		// bob's left with his membership, eve's with her, alice's now:
		// one entry each (issue 32, item 5).
		per := map[string]int{}
		for _, e := range entries {
			var before struct{ User string }
			must(t, json.Unmarshal(e.Before, &before))
			per[before.User]++
			if e.Target != w.keyID || !strings.HasPrefix(e.Actor, "token ") {
				t.Errorf("an upstream.disconnect entry = %+v; want on %s, by the admin's token", e, w.keyID)
			}
		}
		if len(entries) != 3 || per[alice.email] != 1 || per["bob@example.com"] != 1 || per["eve@example.com"] != 1 {
			t.Errorf("upstream.disconnect audited for %v; want once each for alice, bob (his membership removed) and eve (removed)", per)
		}
	})

	// dan has an account at the remote, and meets the elicitation in his
	// clients: he opens its URL, connects, and calls again in the same
	// sessions.
	dan := w.person("dan", true)
	t.Run("from the client", func(t *testing.T) {
		var sessions []*mcp.ClientSession
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			cs := w.session(dan, v, urlElicitation)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
			cancel()
			w.wantElicitation(t, res, err)
			sessions = append(sessions, cs)
		}
		w.connectAccount(dan, nil) // at the elicitation's URL: wantElicitation checked it is connectURL
		for _, cs := range sessions {
			if got := w.whoami(t, cs); got != dan.email {
				t.Errorf("dan's whoami after connecting = %q", got)
			}
		}
	})

	// The front restarts on the same SQLite file: it uses the key file
	// it made at its first start, and people's accounts work on.
	var logs syncBuffer
	w.restartFront(&logs)
	if strings.Contains(logs.String(), "created the secret key file") || strings.Contains(logs.String(), "sealed upstream tokens again") ||
		strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the second start's log:\n%s", logs.String())
	}
	waitFor(t, "the bridge to connect to the restarted front", func() bool {
		_, ok := w.front.gw.Registry().Snapshot(w.front.project.ID).Tools[w.tool]
		return ok
	})
	if got := w.whoami(t, w.session(dan, "2026-07-28", nil)); got != dan.email {
		t.Errorf("dan's whoami after the front restarted = %q", got)
	}

	// No upstream token in the front's or the bridge's log.
	for where, log := range map[string]string{"the front's log": w.frontLogs.String(), "the bridge's log": w.bridge.log.String()} {
		if strings.Contains(log, "sfx_oat_") || strings.Contains(log, "sfx_ort_") {
			t.Errorf("%s holds a token", where)
		}
	}
}

// TestPerPersonAcrossGateways: two front gateways on PostgreSQL and NATS
// behind one public address, the per-person bridge connected to A.
// alice connects her account through A and calls through B; bob starts
// connecting on B and comes back to A, and calls through A; an expiring
// token is refreshed by the gateway the call reaches, and the other then
// uses the new one; carol and a key get their answers through B.
func TestPerPersonAcrossGateways(t *testing.T) {
	t.Parallel()
	w, a, b, lb := newPPCluster(t)
	alice, bob, carol := w.person("alice", true), w.person("bob", true), w.person("carol", false)
	// whoamiThrough calls as p through gateway g, and checks g answered.
	whoamiThrough := func(g *env, p *ppPerson, v string) {
		t.Helper()
		lb.to(g)
		before := lb.mcpRequests(g)
		if got := w.whoami(t, w.session(p, v, nil)); got != p.email {
			t.Errorf("%s's whoami through %s at %s = %q", p.email, g.gw.Addr(), v, got)
		}
		if lb.mcpRequests(g) == before {
			t.Errorf("the call did not go through %s", g.gw.Addr())
		}
	}

	lb.to(a)
	w.connectAccount(alice, nil)
	whoamiThrough(b, alice, "2025-11-25")
	whoamiThrough(b, alice, "2026-07-28")

	lb.to(b)
	w.connectAccount(bob, func() { lb.to(a) })
	whoamiThrough(a, bob, "2026-07-28")
	whoamiThrough(b, bob, "2025-11-25")

	// B refreshes alice's expiring token; A then uses B's.
	refreshes := w.upSt.refreshes.Load()
	w.expireSoon(alice)
	whoamiThrough(b, alice, "2026-07-28")
	whoamiThrough(a, alice, "2025-11-25")
	if n := w.upSt.refreshes.Load(); n != refreshes+1 {
		t.Errorf("the remote saw %d refresh grants; want 1", n-refreshes)
	}
	if st := mcpStatus(t, w.up, w.accessToken(w.box(), alice)); st != 200 {
		t.Errorf("the remote answers alice's stored token with %d; want 200", st)
	}

	lb.to(b)
	if r := call(t, w.session(carol, "2025-11-25", nil), w.tool, map[string]any{}); !r.IsError || text(r) != w.linkSentence() {
		t.Errorf("carol's call through B = %v %q; want %q", r.IsError, text(r), w.linkSentence())
	}
	if r := call(t, b.connect("2026-07-28", b.clientKey, nil), w.tool, map[string]any{}); !r.IsError || text(r) != w.refusal() {
		t.Errorf("a key's call through B = %v %q; want %q", r.IsError, text(r), w.refusal())
	}
}

// TestPerPersonFallbackShared: with "fallback": "shared", a key's calls,
// reads and gets use the bridge's own sign-in (ops), while a person's use
// their own account, and a person without one is still asked to connect;
// with the tool's results cached, none is given to another caller.
func TestPerPersonFallbackShared(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{server: func(s *bridge.Server) { s.Fallback = "shared" }})
	alice, bob, carol := w.person("alice", true), w.person("bob", true), w.person("carol", false)
	w.connectAccount(alice, nil)
	w.connectAccount(bob, nil)
	// Results cached for an hour, as the project may set: a per-person
	// tool's are never reused for another caller.
	w.front.save(store.ToolSettings{Tool: w.tool, CacheSeconds: 3600})
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		if got := w.whoami(t, w.session(bob, v, nil)); got != bob.email {
			t.Errorf("bob's whoami at %s = %q", v, got)
		}
		key := w.front.connect(v, w.front.clientKey, nil)
		if got := w.whoami(t, key); got != "ops@example.com" {
			t.Errorf("a key's whoami at %s = %q; want the shared account's, ops@example.com", v, got)
		}
		if read, got, rerr, gerr := readWho(key); read != "ops@example.com" || got != "ops@example.com" {
			t.Errorf("a key's read and prompt at %s = %q %q (%v, %v); want the shared account's", v, read, got, rerr, gerr)
		}
		if got, err := completeWho(key); got != "ops@example.com" {
			t.Errorf("a key's completion at %s = %q (%v); want the shared account's", v, got, err)
		}
		if got := w.whoami(t, w.session(alice, v, nil)); got != alice.email {
			t.Errorf("alice's whoami at %s = %q", v, got)
		}
		if r := call(t, w.session(carol, v, nil), w.tool, map[string]any{}); !r.IsError || text(r) != w.linkSentence() {
			t.Errorf("carol's call at %s = %v %q; want %q", v, r.IsError, text(r), w.linkSentence())
		}
	}
}

// TestPerPersonKeyRotation rotates the secret key file as the docs say:
// a new key on the first line, the old one below. A gateway started with
// it seals every upstream token again with the new key and says how many;
// the old key alone no longer opens them; calls go on as each person.
// Then the old line goes, and a gateway with the new key alone serves
// them.
func TestPerPersonKeyRotation(t *testing.T) {
	t.Parallel()
	bus := startNATS(t)
	keyFile := writeKeyFile(t)
	lb := newSwitchLB(t)
	w := newPPWorld(t, ppSetup{config: func(c *gateway.Config) {
		c.Bus, c.BusHeartbeat = bus, 250*time.Millisecond
		c.SecretKeyFile = keyFile
		c.PublicURL, c.AllowedHosts = lb.url, []string{"*"}
	}})
	lb.to(w.front)
	alice, bob := w.person("alice", true), w.person("bob", true)
	w.connectAccount(alice, nil)
	w.connectAccount(bob, nil)
	old := w.box()

	oldKey, err := os.ReadFile(keyFile)
	must(t, err)
	newKey := secrets.NewKey()
	rotated := filepath.Join(t.TempDir(), "secret.key")
	must(t, os.WriteFile(rotated, []byte(newKey+"\n"+string(oldKey)), 0o600))
	var logs syncBuffer
	b := w.front.siblingWith(func(c *gateway.Config) { c.SecretKeyFile = rotated }, &logs)
	// Two people's access and refresh tokens.
	if !strings.Contains(logs.String(), `msg="sealed upstream tokens again with the secret key file's first key" values=4`) {
		t.Errorf("the rotated gateway's log does not say it sealed 4 values again:\n%s", logs.String())
	}
	nb, err := secrets.Load(rotated)
	must(t, err)
	for _, p := range []*ppPerson{alice, bob} {
		a := w.account(p)
		if !nb.Current(a.Access) || !nb.Current(a.Refresh) {
			t.Errorf("%s's tokens are not sealed with the new key", p.email)
		}
		if _, err := old.Open(a.Access, fmt.Sprintf("upstream-access:%s:%d", w.keyID, p.id)); err == nil {
			t.Errorf("%s's access token still opens with the old key alone", p.email)
		}
	}
	waitFor(t, "the rotated gateway to list the bridged whoami", func() bool {
		_, ok := b.gw.Registry().Snapshot(b.project.ID).Tools[w.tool]
		return ok
	})
	lb.to(b)
	for _, p := range []*ppPerson{alice, bob} {
		if got := w.whoami(t, w.session(p, "2026-07-28", nil)); got != p.email {
			t.Errorf("%s's whoami after the rotation = %q", p.email, got)
		}
	}

	// The old line goes.
	newOnly := filepath.Join(t.TempDir(), "secret.key")
	must(t, os.WriteFile(newOnly, []byte(newKey+"\n"), 0o600))
	var logs2 syncBuffer
	c := w.front.siblingWith(func(c *gateway.Config) { c.SecretKeyFile = newOnly }, &logs2)
	if strings.Contains(logs2.String(), "sealed upstream tokens again") {
		t.Errorf("a gateway with the new key alone sealed tokens again:\n%s", logs2.String())
	}
	waitFor(t, "the third gateway to list the bridged whoami", func() bool {
		_, ok := c.gw.Registry().Snapshot(c.project.ID).Tools[w.tool]
		return ok
	})
	lb.to(c)
	refreshes := w.upSt.refreshes.Load()
	w.expireSoon(alice)
	if got := w.whoami(t, w.session(alice, "2025-11-25", nil)); got != alice.email {
		t.Errorf("alice's whoami with the new key alone, refreshed = %q", got)
	}
	if n := w.upSt.refreshes.Load(); n != refreshes+1 {
		t.Errorf("the remote saw %d refresh grants; want 1", n-refreshes)
	}
	lines := strings.Split(strings.TrimSpace(string(oldKey)), "\n")
	for _, secret := range []string{newKey, lines[len(lines)-1]} {
		if strings.Contains(logs.String()+logs2.String()+w.frontLogs.String(), secret) {
			t.Errorf("a gateway's log holds a secret key")
		}
	}
}

// TestPerPersonCLI runs the real `spacefix bridge --remote URL
// --per-person`: without a `bridge login` sign-in it does not start, and
// says what to run; after one, people's calls reach the remote as
// themselves and a key's are refused.
func TestPerPersonCLI(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{noBridge: true})
	home := t.TempDir()
	bridgeCmd := func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, binary(t, "../cmd/spacefix"), "bridge", "--url", w.front.url, "--key", w.front.agentKey,
			"--name", "up", "--remote", w.up.url+"/mcp", "--per-person")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+home)
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := bridgeCmd(ctx).CombinedOutput()
	want := "per-person mode lists up's tools with one signed-in account: run `spacefix bridge login up` once (any account may list; each call then uses the caller's own)"
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
		t.Errorf("spacefix bridge --per-person without a sign-in = %v\n%s\nwant it to end saying %q", err, out, want)
	}

	w.login(w.srv, filepath.Join(home, "spacefix", "bridge"))
	before := len(w.front.gw.Registry().All())
	cmd := bridgeCmd(context.Background())
	p, logs := startCmd(t, cmd)
	waitFor(t, "the bridge process to connect", func() bool { return len(w.front.gw.Registry().All()) > before })

	alice := w.person("alice", true)
	w.connectAccount(alice, nil)
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami through the bridge process = %q", got)
	}
	if r := call(t, w.front.connect("2025-11-25", w.front.clientKey, nil), w.tool, map[string]any{}); !r.IsError || text(r) != w.refusal() {
		t.Errorf("a key's call = %v %q; want %q", r.IsError, text(r), w.refusal())
	}
	p.term()
	p.wait(t)
	if strings.Contains(logs.String(), "sfx_oat_") || strings.Contains(logs.String(), w.front.agentKey) {
		t.Errorf("the bridge process logged a token or its key")
	}
}

// TestPerPersonConnectPages: the connect flow's other endings, as a
// browser sees them. A callback is the signed-in person's own: bob cannot
// finish alice's, nor does a response naming another issuer; opened
// twice, it connects once. Declining at the remote connects nothing; a return path brings the person back to
// the dashboard; someone outside the key's project learns nothing of it;
// a stopped bridge is said to be stopped; a revoked agent key takes its
// accounts with it.
func TestPerPersonConnectPages(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice, bob := w.person("alice", true), w.person("bob", true)
	notConnected := html.EscapeString("Your account could not be connected. Start again from the link in your MCP client or from your accounts page; if it fails again, the gateway's log says why.")
	gone := func(p *ppPerson) bool {
		_, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, p.id)
		return errors.Is(err, store.ErrNotFound)
	}

	// bob opens the link alice's browser was sent back with.
	back := w.authorize(alice, "approve")
	if status, _, page := browse(t, back.String(), bob.front.session); status != http.StatusBadRequest || !strings.Contains(page, notConnected) {
		t.Errorf("bob opening alice's callback = %d; want 400 saying %q\n%s", status, notConnected, page)
	}
	if !gone(alice) || !gone(bob) {
		t.Errorf("bob's opening of alice's callback connected an account")
	}

	// A response that names another issuer (a mix-up): not connected, and
	// the code is not spent; the genuine response then connects.
	back = w.authorize(alice, "approve")
	if back.Query().Get("iss") != w.up.url {
		t.Errorf("the remote's response names issuer %q; want %s", back.Query().Get("iss"), w.up.url)
	}
	mixed := *back
	q := mixed.Query()
	q.Set("iss", "https://evil.example")
	mixed.RawQuery = q.Encode()
	if status, _, page := browse(t, mixed.String(), alice.front.session); status != http.StatusBadRequest || !strings.Contains(page, notConnected) || !gone(alice) {
		t.Errorf("a callback naming another issuer = %d; want 400 saying %q and no account\n%s", status, notConnected, page)
	}
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK || gone(alice) {
		t.Errorf("the genuine callback after a mix-up = %d; want 200 and alice's account\n%s", status, page)
	}
	if n, err := w.front.store.DeleteUpstreamAccounts(context.Background(), store.UpstreamFilter{AgentKeyID: w.keyID, UserID: alice.id}); n != 1 || err != nil {
		t.Fatalf("delete alice's account: %d %v", n, err)
	}

	// alice declines at the remote.
	back = w.authorize(alice, "deny")
	cancelled := "The connection was cancelled at the remote server, so no account was connected."
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK || !strings.Contains(page, cancelled) || !gone(alice) {
		t.Errorf("alice's callback after declining = %d; want 200 saying %q and no account\n%s", status, cancelled, page)
	}

	// The callback opened twice (the page reloaded, or restored with the
	// browser's tabs): connected once. The used code must not reach the
	// remote again, which would take it for a stolen one and end the grant.
	back = w.authorize(alice, "approve")
	connected := "Your " + w.host + " account is connected."
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK || gone(alice) || !strings.Contains(page, connected) {
		t.Fatalf("alice's callback = %d\n%s", status, page)
	}
	first := w.account(alice)
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK || !strings.Contains(page, connected) {
		t.Errorf("alice's callback opened again = %d; want 200 saying %q\n%s", status, connected, page)
	}
	if again := w.account(alice); again.Version != first.Version {
		t.Errorf("alice's account was written again when the callback was opened again")
	}
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami after she opened the callback twice = %q", got)
	}

	// From the dashboard: back to the page the person came from.
	status, loc, _ := browse(t, w.connectURL()+"?return=/me", bob.front.session)
	if status != http.StatusSeeOther {
		t.Fatalf("GET /connect?return=/me = %d", status)
	}
	authBack, err := bob.up.consent(loc, "approve")
	must(t, err)
	status, loc, _ = browse(t, authBack.String(), bob.front.session)
	if to, _ := url.Parse(loc); status != http.StatusSeeOther || to == nil || to.Host != "" || to.Path != "/me" || gone(bob) {
		t.Errorf("bob's callback from the dashboard = %d to %q; want 303 to /me and his account", status, loc)
	}

	// Someone outside the project.
	dave := newUser(t, w.front, "dave@example.com", false)
	noKey := html.EscapeString(fmt.Sprintf("There is no agent key %q, or you are not a member of its project.", w.keyID))
	if status, _, page := browse(t, w.connectURL(), dave.session); status != http.StatusNotFound || !strings.Contains(page, noKey) {
		t.Errorf("GET /connect as a non-member = %d; want 404 saying %q\n%s", status, noKey, page)
	}

	// The bridge stops.
	w.bridge.stop()
	waitFor(t, "the bridge to be gone", func() bool { return len(w.front.gw.Registry().All()) == 0 })
	stopped := "is not running, so its account cannot be connected now. Ask its operator to start it, then try again."
	if status, _, page := browse(t, w.connectURL(), alice.front.session); status != http.StatusServiceUnavailable || !strings.Contains(page, stopped) {
		t.Errorf("GET /connect with the bridge stopped = %d; want 503 saying %q\n%s", status, stopped, page)
	}

	// The bridge's agent key is revoked: its accounts go with it.
	apiPost(t, w.front, w.front.adminToken(), "/api/projects/"+w.front.project.Name+"/keys/"+w.keyID+"/revoke", http.StatusOK)
	if !gone(alice) || !gone(bob) {
		t.Errorf("accounts of a revoked agent key are still stored")
	}
}

// TestPerPersonSessionRemote: a remote the bridge speaks 2025-11-25 to
// (one MCP session per person at the remote): each call is its caller's,
// and a token the remote drops is refreshed under the person's session.
func TestPerPersonSessionRemote(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{server: func(s *bridge.Server) { s.Protocol = "2025-11-25" }})
	w.bridge.waitLog(t, "connected to the MCP server", "protocol=2025-11-25")
	alice, bob := w.person("alice", true), w.person("bob", true)
	w.connectAccount(alice, nil)
	w.connectAccount(bob, nil)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		for _, p := range []*ppPerson{alice, bob, alice} {
			if got := w.whoami(t, w.session(p, v, nil)); got != p.email {
				t.Errorf("%s's whoami at %s = %q", p.email, v, got)
			}
		}
	}
	w.dropToken(t, w.session(alice, "2025-11-25", nil), alice)
	refreshes := w.upSt.refreshes.Load()
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami after the remote dropped her token = %q", got)
	}
	if n := w.upSt.refreshes.Load(); n != refreshes+1 {
		t.Errorf("the remote saw %d refresh grants; want 1", n-refreshes)
	}
	if got := w.whoami(t, w.session(bob, "2026-07-28", nil)); got != bob.email {
		t.Errorf("bob's whoami = %q", got)
	}
}

// TestPerPersonRefreshRace: alice calls through both gateways at once
// while her upstream token expires, and again after the remote dropped it. The remote, like any OAuth 2.1
// server that rotates refresh tokens, ends the whole grant when one is
// used twice; so the gateways must refresh once between them, and every
// call says alice.
func TestPerPersonRefreshRace(t *testing.T) {
	t.Parallel()
	w, a, b, _ := newPPCluster(t)
	alice := w.person("alice", true)
	w.connectAccount(alice, nil)
	// bothAtOnce calls as alice through A and B at once, in sessions of
	// both eras, and checks the remote saw one refresh.
	bothAtOnce := func(why string) {
		t.Helper()
		var sessions []*mcp.ClientSession
		for _, g := range []*env{a.direct(), b.direct()} {
			for _, v := range []string{"2025-11-25", "2026-07-28"} {
				sessions = append(sessions, g.connect(v, alice.token, nil))
			}
		}
		refreshes := w.upSt.refreshes.Load()
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
				switch {
				case err != nil:
					t.Errorf("alice's whoami through both at once, %s: %v", why, err)
				case r.IsError || text(r) != alice.email:
					t.Errorf("alice's whoami through both at once, %s = %v %q", why, r.IsError, text(r))
				}
			}()
		}
		wg.Wait()
		if n := w.upSt.refreshes.Load(); n != refreshes+1 {
			t.Errorf("the remote saw %d refresh grants when both gateways refreshed at once, %s; want 1", n-refreshes, why)
		}
	}
	w.expireSoon(alice)
	bothAtOnce("her token expiring")
	// The remote drops her token early: both gateways hear 401 at once.
	w.dropToken(t, w.session(alice, "2026-07-28", nil), alice)
	bothAtOnce("her token dropped by the remote")
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami afterwards = %q", got)
	}
}

// TestPerPersonTwoBridges: two per-person bridges of the same remote,
// each with its own agent key. An account is connected per agent key:
// alice's account through one does not serve the other, whose calls ask
// her to connect there too; the front registered one client at the
// remote for both.
func TestPerPersonTwoBridges(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	key2, secret2 := w.front.newKey(store.Key{Kind: store.KindAgent, Name: "second"})
	srv2 := w.srv
	srv2.Name = "up2"
	w.startBridge(srv2, secret2)
	alice := w.person("alice", true)
	w.connectAccount(alice, nil)
	cs := w.session(alice, "2026-07-28", nil)
	if got := w.whoami(t, cs); got != alice.email {
		t.Errorf("alice's whoami through the first bridge = %q", got)
	}
	connect2 := w.front.url + "/connect/" + key2.ID
	want := fmt.Sprintf("Connect your %s account to use up2__whoami: open %s, sign in there, then call up2__whoami again.", w.host, connect2)
	if r := call(t, cs, "up2__whoami", map[string]any{}); !r.IsError || text(r) != want {
		t.Errorf("alice's call through the second bridge = %v %q; want %q", r.IsError, text(r), want)
	}
	status, loc, _ := browse(t, connect2, alice.front.session)
	if status != http.StatusSeeOther {
		t.Fatalf("GET %s = %d", connect2, status)
	}
	back, err := alice.up.consent(loc, "approve")
	must(t, err)
	if status, _, page := browse(t, back.String(), alice.front.session); status != http.StatusOK {
		t.Fatalf("the second callback = %d\n%s", status, page)
	}
	if r := call(t, cs, "up2__whoami", map[string]any{}); r.IsError || text(r) != alice.email {
		t.Errorf("alice's call through the second bridge after connecting = %v %q", r.IsError, text(r))
	}
	clients, err := w.front.store.UpstreamClients(context.Background())
	must(t, err)
	if len(clients) != 1 || clients[0].Resource != w.up.url+"/mcp" || clients[0].RedirectURI != w.front.url+"/upstream/callback" {
		t.Errorf("the front's clients at the remote = %+v; want one for %s/mcp", clients, w.up.url)
	}
}

// TestPerPersonClientPruned: the front registered a client at the remote
// when bob opened the connect page, and bob went no further. A day later
// the remote prunes the client nobody approved (as Spacefix's own OAuth
// server does after ClientUnusedTTL). alice must still be able to
// connect, and call as herself.
func TestPerPersonClientPruned(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice, bob := w.person("alice", true), w.person("bob", true)
	if status, _, _ := browse(t, w.connectURL(), bob.front.session); status != http.StatusSeeOther {
		t.Fatalf("bob's GET /connect = %d", status)
	}
	// A day later: the front's client is a day old, and the remote prunes.
	ctx := context.Background()
	kept, err := w.front.store.UpstreamClient(ctx, w.up.url+"/mcp", w.front.url+"/upstream/callback")
	must(t, err)
	kept.CreatedAt = time.Now().Add(-25 * time.Hour)
	must(t, w.front.store.PutUpstreamClient(ctx, kept))
	later := time.Now().Add(time.Hour)
	n, err := w.up.store.PruneOAuthClients(ctx, later, later)
	must(t, err)
	if n != 1 {
		t.Fatalf("the remote pruned %d clients; want the front's one", n)
	}
	w.connectAccount(alice, nil)
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami = %q", got)
	}
}
