package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
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

// recordingRemote is another remote, "b", in front of the same MCP server
// and authorization server: a reverse proxy to up that records the
// Authorization header of every request it gets. A token of up's is good
// at b, so a token sent there by mistake would work: only the record
// shows it went.
type recordingRemote struct {
	url  string
	mu   sync.Mutex
	auth []string
}

func newRecordingRemote(t *testing.T, target string) *recordingRemote {
	t.Helper()
	to, err := url.Parse(target)
	must(t, err)
	rr := &recordingRemote{}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			if h := pr.In.Header.Get("Authorization"); h != "" {
				rr.mu.Lock()
				rr.auth = append(rr.auth, h)
				rr.mu.Unlock()
			}
			pr.SetURL(to)
		},
		FlushInterval: -1,
	})
	t.Cleanup(srv.Close)
	rr.url = srv.URL
	return rr
}

// seen is every Authorization header b got.
func (rr *recordingRemote) seen() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]string(nil), rr.auth...)
}

// signInFor copies the operator's `bridge login` sign-in of the remote in
// dir to the server's new URL, as `spacefix bridge login` at that URL
// would leave it, and returns the shared access token.
func signInFor(t *testing.T, dir, name, newURL string) string {
	t.Helper()
	path := filepath.Join(dir, name+".json")
	data, err := os.ReadFile(path)
	must(t, err)
	var f map[string]any
	must(t, json.Unmarshal(data, &f))
	f["url"] = newURL
	data, err = json.Marshal(f)
	must(t, err)
	must(t, os.WriteFile(path, data, 0o600))
	tok, _ := f["token"].(map[string]any)
	access, _ := tok["access_token"].(string)
	if access == "" {
		t.Fatalf("the sign-in in %s has no access token", path)
	}
	return access
}

// TestPerPersonRemoteChanged (issue 32, item 2): alice connected her
// account for remote a; the bridge is restarted with the same agent key
// and --remote b. Her next call, with her token about to expire, must not
// take her token (nor a freshly refreshed one) to b: b sees only the
// operator's shared sign-in, the remote is asked for no refresh, and
// alice gets the connect answer for b. Her account stays hers at a: with
// the bridge back on a, her calls work again.
func TestPerPersonRemoteChanged(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice := w.person("alice", true)
	w.connectAccount(alice, nil)
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Fatalf("alice's whoami at a = %q", got)
	}
	hers := w.accessToken(w.box(), alice)

	b := newRecordingRemote(t, w.up.url)
	w.bridge.stop()
	waitFor(t, "the bridge of a to be gone", func() bool { return len(w.front.gw.Registry().All()) == 0 })
	dir := t.TempDir()
	w.login(w.srv, dir)
	shared := signInFor(t, dir, w.srv.Name, b.url+"/mcp")
	srvB := w.srv
	srvB.URL = b.url + "/mcp"
	onB := w.front.direct().startBridge(srvB, bridge.Options{TokenDir: dir})

	refreshes := w.upSt.refreshes.Load()
	w.expireSoon(alice) // the front would refresh it before sending it
	bHost := strings.TrimPrefix(b.url, "http://")
	wb := *w
	wb.host = bHost
	want := fmt.Sprintf("Connect your %s account to use %s: open %s, sign in there, then call %s again.", bHost, w.tool, w.connectURL(), w.tool)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		if r := call(t, w.session(alice, v, nil), w.tool, map[string]any{}); !r.IsError || text(r) != want {
			t.Errorf("alice's call at %s through the bridge of b = %v %q; want the error %q", v, r.IsError, text(r), want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := w.session(alice, v, urlElicitation).CallTool(ctx, &mcp.CallToolParams{Name: w.tool, Arguments: map[string]any{}})
		cancel()
		wb.wantElicitation(t, res, err)
	}
	read, got, rerr, gerr := readWho(w.session(alice, "2026-07-28", nil))
	wantRead := fmt.Sprintf("Connect your %s account to use who://me: open %s, sign in there, then call who://me again.", bHost, w.connectURL())
	if rpcMessage(rerr) != wantRead || gerr == nil {
		t.Errorf("alice's read and prompt through the bridge of b = %q %q (%v, %v); want the connect answer", read, got, rerr, gerr)
	}

	if n := w.upSt.refreshes.Load(); n != refreshes {
		t.Errorf("the remote saw %d refresh grants for alice's account while the bridge was on b; want 0", n-refreshes)
	}
	after := w.accessToken(w.box(), alice)
	seen := b.seen()
	if len(seen) == 0 {
		t.Fatalf("b got no request with a token: the bridge did not list its tools there")
	}
	for _, h := range seen {
		if h != "Bearer "+shared {
			t.Errorf("b got a token that is not the operator's shared sign-in (alice's before: %v, alice's now: %v)", h == "Bearer "+hers, h == "Bearer "+after)
		}
	}

	// Back on a: alice's account is still hers there.
	onB.stop()
	waitFor(t, "the bridge of b to be gone", func() bool { return len(w.front.gw.Registry().All()) == 0 })
	w.bridge = w.startBridge(w.srv, w.front.agentKey)
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Errorf("alice's whoami with the bridge back on a = %q", got)
	}
}

// TestPerPersonKeyFileLost (issue 32, item 3): the front's secret key
// file is lost between two starts (the gateway makes a new one). alice's
// stored account no longer opens: her next call gets the reconnect answer
// instead of "could not get your account's token" forever, the account is
// dropped, the log says why at WARN, and her page offers Connect (before
// that call too).
func TestPerPersonKeyFileLost(t *testing.T) {
	t.Parallel()
	w := newPPWorld(t, ppSetup{})
	alice := w.person("alice", true)
	w.connectAccount(alice, nil)
	if got := w.whoami(t, w.session(alice, "2026-07-28", nil)); got != alice.email {
		t.Fatalf("alice's whoami = %q", got)
	}
	if w.front.dataPath != "" {
		keyFile := filepath.Join(filepath.Dir(w.front.dataPath), gateway.DefaultSecretKeyFile)
		must(t, os.Remove(keyFile))
		w.restartFront(&syncBuffer{})
		waitFor(t, "the bridge to reconnect", func() bool {
			_, ok := w.front.gw.Registry().Snapshot(w.front.project.ID).Tools[w.tool]
			return ok
		})
	} else {
		// On PostgreSQL a gateway does not start with a key file that does
		// not open what the store holds: the account is sealed with a key
		// the gateways do not have instead, as another cluster's would be.
		sealElsewhere(t, w, alice)
	}

	meOffersConnect := func(when string) {
		t.Helper()
		status, _, page := browse(t, w.front.url+"/me", alice.front.session)
		if status != http.StatusOK || !strings.Contains(page, `href="/connect/`+w.keyID) || !strings.Contains(page, "Not connected") {
			t.Errorf("alice's /me %s = %d; want Not connected and a Connect link\n%s", when, status, page)
		}
	}
	meOffersConnect("before her next call")
	want := fmt.Sprintf("Your %s account needs connecting again: open %s, sign in there, then call %s again.", w.host, w.connectURL(), w.tool)
	if r := call(t, w.session(alice, "2026-07-28", nil), w.tool, map[string]any{}); !r.IsError || text(r) != want {
		t.Errorf("alice's call after the key file was lost = %v %q; want the error %q", r.IsError, text(r), want)
	}
	if _, err := w.front.store.UpstreamAccount(context.Background(), w.keyID, alice.id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("alice's account the key file does not open: %v; want it dropped", err)
	}
	if warn := `level=WARN msg="upstream: the secret key file does not open an account; it is dropped and the person asked to connect again (was the key file lost or replaced?)"`; !strings.Contains(w.frontLogs.String(), warn) {
		t.Errorf("the front's log does not say %s", warn)
	}
	meOffersConnect("after her account was dropped")
	// Connecting again works.
	w.connectAccount(alice, nil)
	if got := w.whoami(t, w.session(alice, "2025-11-25", nil)); got != alice.email {
		t.Errorf("alice's whoami after connecting again = %q", got)
	}
}

// sealElsewhere seals p's stored upstream tokens again with a key the
// front does not have.
func sealElsewhere(t *testing.T, w *ppWorld, p *ppPerson) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(secrets.NewKey())
	must(t, err)
	other, err := secrets.New(raw)
	must(t, err)
	a := w.account(p)
	a.Access = other.Seal([]byte("elsewhere"), fmt.Sprintf("upstream-access:%s:%d", w.keyID, p.id))
	a.Refresh = other.Seal([]byte("elsewhere"), fmt.Sprintf("upstream-refresh:%s:%d", w.keyID, p.id))
	if ok, err := w.front.store.UpdateUpstreamAccount(context.Background(), a); !ok || err != nil {
		t.Fatalf("seal %s's account elsewhere: %v %v", p.email, ok, err)
	}
}
