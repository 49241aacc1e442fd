package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/interceptors"
	"github.com/spacefix/spacefix/internal/testenv"
)

// guardServer is a real interceptor server (go-sdk, Streamable HTTP on
// loopback) offering a validator, a mutator with a priority hint and a
// validator in audit mode; it lets in only the bearer token s3cret-guard.
func guardServer(t *testing.T) string {
	t.Helper()
	infos := []interceptors.Info{
		{Name: "no-999", Type: interceptors.Validation, Hook: interceptors.Hook{Events: []string{"tools/call"}, Phase: interceptors.PhaseRequest}},
		{Name: "emails", Type: interceptors.Mutation, Hook: interceptors.Hook{Events: []string{"tools/call", "resources/read"}, Phase: interceptors.PhaseResponse},
			PriorityHint: interceptors.Priority{Response: 10}},
		{Name: "shadow", Type: interceptors.Validation, Mode: "audit", Hook: interceptors.Hook{Events: []string{"*"}, Phase: interceptors.PhaseBoth}},
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "guard", Version: "1"}, nil)
	if err := mcp.AddReceivingCustomMethod(s, interceptors.MethodList, func(context.Context, *mcp.ServerSession, *interceptors.ListParams) (*interceptors.ListResult, error) {
		return &interceptors.ListResult{Interceptors: infos}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(s, interceptors.MethodInvoke, func(context.Context, *mcp.ServerSession, *interceptors.InvokeParams) (*interceptors.InvokeResult, error) {
		valid := true
		return &interceptors.InvokeResult{Valid: &valid}, nil
	}); err != nil {
		t.Fatal(err)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-guard" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// guardPolicy is a policy with the guard server at url, reached with a
// token in a header, and a server at gone that refuses connections.
func guardPolicy(url, gone string) map[string]any {
	return map[string]any{"rules": []any{}, "interceptors": []any{
		map[string]any{"name": "guard", "url": url, "headers": map[string]string{"Authorization": "Bearer s3cret-guard"}},
		map[string]any{"url": gone, "failOpen": true, "timeout": "200ms"},
	}}
}

// TestPolicyInterceptorsAPI: GET …/policy/interceptors says what this
// gateway found at the interceptor servers of the saved policy: the
// guard server listed with its three interceptors, and a server that
// refuses connections as unreachable, in a sentence that says what to
// check; the guard's token appears nowhere in the answer.
func TestPolicyInterceptorsAPI(t *testing.T) {
	url := guardServer(t) // first: it stops after the gateway
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	w := startGatewayWith(t, func(c *gateway.Config) { c.UpstreamAllowLoopback = true })
	var none apitypes.PolicyInterceptors
	w.admin("GET", "/api/projects/default/policy/interceptors", nil, &none)
	if d := cmp.Diff(apitypes.PolicyInterceptors{Servers: []apitypes.InterceptorServer{}}, none); d != "" {
		t.Errorf("without a policy (-want +got):\n%s", d)
	}

	w.admin("PUT", "/api/projects/default/policy", guardPolicy(url, gone), nil)
	before := time.Now().Add(-time.Second)
	body := w.adminRaw("GET", "/api/projects/default/policy/interceptors")
	if strings.Contains(body, "s3cret") {
		t.Errorf("the answer shows the guard's token:\n%s", body)
	}
	var got apitypes.PolicyInterceptors
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	for _, s := range got.Servers {
		if s.CheckedAt == nil || s.CheckedAt.Before(before) || s.CheckedAt.After(time.Now()) {
			t.Errorf("%s checked at %v; want a moment ago", s.Name, s.CheckedAt)
		}
	}
	want := apitypes.PolicyInterceptors{Version: 1, Servers: []apitypes.InterceptorServer{
		{Name: "guard", URL: url, State: "listed", CheckedAt: got.Servers[0].CheckedAt, Interceptors: []apitypes.InterceptorInfo{
			{Name: "no-999", Type: "validation", Hooks: []apitypes.InterceptorHook{{Event: "tools/call", Phase: "request"}}, Mode: "enforce"},
			{Name: "emails", Type: "mutation", Hooks: []apitypes.InterceptorHook{{Event: "tools/call", Phase: "response"}, {Event: "resources/read", Phase: "response"}},
				PriorityHint: &apitypes.InterceptorPriority{Response: 10}, Mode: "enforce"},
			{Name: "shadow", Type: "validation", Hooks: []apitypes.InterceptorHook{{Event: "*", Phase: "both"}}, Mode: "audit"},
		}},
		{Name: strings.TrimSuffix(strings.TrimPrefix(gone, "http://"), "/mcp"), URL: gone, State: "unreachable", CheckedAt: got.Servers[1].CheckedAt, Interceptors: []apitypes.InterceptorInfo{},
			Error: "Nothing answers at " + gone + " (connection refused): check that the server runs there."},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GET …/policy/interceptors (-want +got):\n%s", d)
	}
	var compact bytes.Buffer
	json.Compact(&compact, []byte(body))
	if c := compact.String(); !strings.Contains(c, `"failOpen":false`) || !strings.Contains(c, `"priorityHint":{"response":10}`) {
		t.Errorf("the answer lacks failOpen false or the priority hint as documented:\n%s", c)
	}
}

// adminRaw sends an admin API request with a fresh token and returns the
// answer's body, failing on a status other than 200.
func (w *gw) adminRaw(method, path string) string {
	w.t.Helper()
	w.admin("GET", "/api/me", nil, nil) // makes the token
	req, _ := http.NewRequest(method, w.g.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		w.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return string(b)
}

// TestBrowserPolicyInterceptors: the Policy page says, at 1280 and 390 px
// without scrolling sideways, that the interceptors are as this gateway
// found them, that the guard server was listed with its three
// interceptors (type, hooks, priority, mode), and why the server that
// refuses connections could not be listed and what that means for calls.
func TestBrowserPolicyInterceptors(t *testing.T) {
	ctx := browser(t)
	url := guardServer(t)
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	w := startGatewayWith(t, func(c *gateway.Config) { c.UpstreamAllowLoopback = true })
	w.signUp(ctx)
	w.admin("PUT", "/api/projects/default/policy", guardPolicy(url, gone), nil)

	wantFound := []*regexp.Regexp{
		regexp.MustCompile(`^listed 3 interceptors \d+s ago\.$`),
		regexp.MustCompile(`^could not be listed \d+s ago: Nothing answers at ` + regexp.QuoteMeta(gone) +
			regexp.QuoteMeta(` (connection refused): check that the server runs there. Calls go on without it (it fails open).`) + `$`),
	}
	wantRows := [][]string{
		{"no-999", "validation", "tools/call request", "—", "enforce"},
		{"emails", "mutation", "tools/call response, resources/read response", "response 10", "enforce"},
		{"shadow", "validation", "* both", "—", "audit"},
	}
	for _, size := range widths {
		run(t, ctx, chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(w.url("/p/default/policy")), chromedp.WaitVisible(chromedp.CSS(`[data-interceptors-view]`)))
		type part struct {
			View  string     `json:"view"`
			Found []string   `json:"found"`
			Rows  [][]string `json:"rows"`
			Page  string     `json:"page"`
		}
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[part](`({
			view: document.querySelector('[data-interceptors-view]').textContent,
			found: [...document.querySelectorAll('[data-interceptor-server] [data-found]')].map(p => p.textContent.trim().replace(/\s+/g, ' ')),
			rows: [...document.querySelectorAll('[data-interceptor-server="guard"] tr[data-interceptor]')].map(r => [...r.cells].map(c => c.textContent.trim())),
			page: document.documentElement.outerHTML,
		})`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(shown.View, "As this gateway found them:") {
			t.Errorf("at %s px the part says %q; want it to start %q", size.name, shown.View, "As this gateway found them:")
		}
		if len(shown.Found) != 2 || !wantFound[0].MatchString(shown.Found[0]) || !wantFound[1].MatchString(shown.Found[1]) {
			t.Errorf("at %s px the servers' states read\n%q\nwant them to match\n%q", size.name, shown.Found, wantFound)
		}
		if d := cmp.Diff(wantRows, shown.Rows); d != "" {
			t.Errorf("at %s px the guard's interceptors (-want +got):\n%s", size.name, d)
		}
		if strings.Contains(shown.Page, "s3cret") {
			t.Errorf("at %s px the page shows the guard's token", size.name)
		}
		sizeShot(t, ctx, "policy-interceptors-"+size.name)
		if size.name == "1280" {
			screenshotView(t, ctx, "policy-interceptors")
		}
		noSideScroll(t, ctx, "the Policy page's interceptors at "+size.name+" px")
	}
}
