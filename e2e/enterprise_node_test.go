package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/testenv"
)

// TestEnterpriseTypeScriptClient: the official TypeScript SDK's
// CrossAppAccessProvider (e2e/enterprise/cross-app-access.mjs) signs a
// person in through the company's IdP and calls a tool as them, with a
// Bearer token and, holding a DPoP session, with a DPoP-bound one (with
// and without nonces).
func TestEnterpriseTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node is not on PATH; install Node.js 20 or later to run the TypeScript SDK client")
	}
	dir, err := filepath.Abs("enterprise")
	must(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "client")); err != nil {
		testenv.Unavailable(t, "e2e/enterprise/node_modules lacks @modelcontextprotocol/client; install it with: npm ci --prefix e2e/enterprise")
	}
	for _, tc := range []struct {
		name, dpop, tokenType string
		nonce                 bool // --oauth-dpop-nonce: the client must answer use_dpop_nonce at both endpoints
	}{{"bearer", "0", "Bearer", false}, {"dpop", "1", "DPoP", false}, {"dpop-nonce", "1", "DPoP", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnterprise(t, withConfig(func(c *gateway.Config) { c.UpstreamAllowLoopback, c.OAuthDPoPNonce = true, tc.nonce }))
			e.startAgent(core.Options{}, whoAgent(t))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "cross-app-access.mjs"), e.url+"/mcp", e.issuer, e.idp.srv.URL+"/token",
				e.idp.idToken("00u-ann", "ann@example.com"), idpClient, e.client, e.secret, tc.dpop)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			events := map[string]map[string]any{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				var ev map[string]any
				if json.Unmarshal(sc.Bytes(), &ev) == nil {
					events[ev["event"].(string)] = ev
				}
			}
			if err != nil {
				t.Fatalf("node cross-app-access.mjs: %v; events %v\n%s", err, events, stderr.String())
			}
			if a := events["assertion"]; a["authorizationServer"] != e.issuer && a["authorizationServer"] != e.issuer+"/" {
				t.Errorf("the provider asked the IdP for an ID-JAG for %v; want the gateway's issuer %s", a, e.issuer)
			}
			if tok := events["token"]; tok["tokenType"] != tc.tokenType || tok["refresh"] != false {
				t.Errorf("token = %v; want token_type %s and no refresh token", tok, tc.tokenType)
			}
			var w who
			if err := json.Unmarshal([]byte(events["whoami"]["text"].(string)), &w); err != nil {
				t.Fatalf("whoami = %v: %v", events["whoami"], err)
			}
			if w.Person == nil || w.Person.Email != "ann@example.com" || w.App == nil || w.App.ID != e.client || w.App.Name != "Wiki" {
				t.Errorf("the handler saw %+v; want ann and the Wiki app", w)
			}
		})
	}
}
