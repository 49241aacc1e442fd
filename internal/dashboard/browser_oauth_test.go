package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/testenv"
)

// tsSDK finds Node.js and the official TypeScript SDK that sdk/node's
// development dependencies install (npm ci --prefix sdk/node).
func tsSDK(t *testing.T) (node, sdkDir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "no node on PATH; install Node.js 20 or later")
	}
	sdkDir, _ = filepath.Abs(filepath.Join("..", "..", "sdk", "node", "node_modules", "@modelcontextprotocol", "sdk"))
	if _, err := os.Stat(filepath.Join(sdkDir, "dist", "esm", "client", "auth.js")); err != nil {
		testenv.Unavailable(t, "the TypeScript MCP SDK is not installed; run: npm ci --prefix sdk/node")
	}
	return node, sdkDir
}

// tsClient is the running oauth-client.mjs.
type tsClient struct {
	t     *testing.T
	lines chan string
	stdin io.WriteCloser
	done  chan error
}

func startTSClient(t *testing.T, args ...string) *tsClient {
	t.Helper()
	node, sdkDir := tsSDK(t)
	cmd := exec.Command(node, append([]string{filepath.Join("testdata", "oauth-client.mjs"), sdkDir}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &tsClient{t: t, lines: make(chan string, 16), stdin: stdin, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("oauth-client.mjs stderr:\n%s", stderr.String())
		}
	})
	return c
}

// expect waits for the client's next line and checks its prefix.
func (c *tsClient) expect(prefix string) string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the TypeScript client ended before %q", prefix)
		}
		if !strings.HasPrefix(line, prefix) {
			c.t.Fatalf("TypeScript client said %q; want %q…", line, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(30 * time.Second):
		c.t.Fatalf("timed out waiting for the TypeScript client to say %q", prefix)
	}
	return ""
}

// TestBrowserOAuthTSClient: the official TypeScript SDK client signs in to
// a real gateway with OAuth, the person's part done in headless Chromium,
// once registering dynamically (and signing in to the dashboard first) and
// once naming itself by a Client ID Metadata Document. Then it lists and
// calls tools, refreshes its tokens, is disconnected from the project's
// Keys page and is made to sign in again.
func TestBrowserOAuthTSClient(t *testing.T) {
	tsSDK(t)
	chromium(t)
	for _, mode := range []string{"dynamic registration", "metadata document"} {
		t.Run(mode, func(t *testing.T) {
			cimd := mode == "metadata document"
			var docURL string
			var config func(*gateway.Config)
			if cimd {
				doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"client_id":%q,"client_name":"ts-sdk-app (document)","client_uri":"https://app.example","redirect_uris":["http://127.0.0.1/callback"],"grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none"}`,
						"https://"+r.Host+r.URL.Path)
				}))
				t.Cleanup(doc.Close)
				docURL = doc.URL + "/oauth/client.json"
				roots := doc.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
				config = func(c *gateway.Config) { c.OAuthPrivateClientIDs, c.OAuthClientIDRoots = true, roots }
			}
			w := startGatewayWith(t, config)
			w.agent("", orderTools(getOrderV1))
			ctx := browser(t)
			w.signUp(ctx)
			if !cimd {
				// Signed out: the consent page asks to sign in first.
				if _, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (cdp.Empty, error) {
					return cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
				}); err != nil {
					t.Fatal(err)
				}
			}

			args := []string{w.url("/mcp")}
			if cimd {
				args = append(args, docURL)
			}
			c := startTSClient(t, args...)
			authURL := c.expect("AUTHORIZE ")
			run(t, ctx, chromedp.Navigate(authURL))
			if !cimd {
				run(t, ctx,
					chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
					chromedp.SetValue(chromedp.CSS(`input[name=email]`), "ada@example.com"),
					chromedp.SetValue(chromedp.CSS(`input[name=password]`), "correct horse battery"),
					chromedp.Click(chromedp.CSS(`button[type=submit]`)),
				)
			}
			run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#approve`)))
			facts, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#oauth-client').innerText`))
			if err != nil {
				t.Fatal(err)
			}
			wantName := "ts-sdk-app"
			if cimd {
				wantName = "ts-sdk-app (document)"
			}
			for _, want := range []string{wantName, "unverified", "127.0.0.1:"} {
				if !strings.Contains(facts, want) {
					t.Errorf("consent page says %q; want it to show %q", facts, want)
				}
			}
			if cimd && !strings.Contains(facts, docURL) {
				t.Errorf("consent page says %q; want the metadata document URL %s", facts, docURL)
			}
			until(t, ctx, "read only chosen first", `document.querySelector('input[name=access]:checked').value === 'read'`)
			screenshotView(t, ctx, "oauth-consent")
			// This app is to create orders too: the person chooses more.
			run(t, ctx, chromedp.Click(chromedp.CSS(`input[name=access][value=write]`)), chromedp.Click(chromedp.CSS(`#approve`)))

			if got := c.expect("TOOLS "); got != "create_order,get_order,search_orders" {
				t.Errorf("tools = %s", got)
			}
			if got := c.expect("CALL "); !strings.Contains(got, `\"customer\":\"ada\"`) {
				t.Errorf("get_order = %s", got)
			}
			if got := c.expect("REFRESHED "); got != "true 3" {
				t.Errorf("after refresh: %s; want rotated tokens (true) and 3 tools", got)
			}
			c.expect("DONE")

			// The person disconnects the app on the project's Keys page.
			run(t, ctx, chromedp.Navigate(w.url("/p/default/keys")))
			until(t, ctx, "the app under Connected apps", fmt.Sprintf(`document.querySelector('#apps + table').innerText.includes(%q)`, wantName))
			screenshotView(t, ctx, "oauth-connected-apps")
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
				t.Fatal(err)
			}
			run(t, ctx, chromedp.Click(chromedp.CSS(`#apps + table button.danger`)))
			until(t, ctx, "the app gone from Connected apps", `document.querySelector('#apps + table').innerText.includes('No connected apps.')`)

			fmt.Fprintln(c.stdin, "again")
			c.expect("REAUTH ")
			c.expect("REFUSED true")
		})
	}
}
