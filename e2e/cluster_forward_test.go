package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/cluster"
	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/secrets"
)

// wantForwardRefused is what a request posing as a peer's forward reads.
const wantForwardRefused = "This request carries the headers a Spacefix gateway adds when it forwards a request to another gateway, but its signature does not verify here. MCP clients must not send X-Spacefix-Forwarded-By or X-Spacefix-Forward-Auth; gateways of one cluster must share the same --secret-key-file and keep their clocks within 30 seconds of each other."

// Two gateways on PostgreSQL and NATS: a 2025 session made on A still works
// through B, which forwards its requests to A signed with the key file
// they share. A request sent straight to A that poses as such a forward —
// the header alone, a made-up signature, or a real one replayed after 30
// seconds — is refused with 403 and never reaches the session or the
// agent; A's log names the sender's address and no header's value.
func TestClusterForwardsAreSigned(t *testing.T) {
	t.Parallel()
	var pg string
	var logs syncBuffer
	a := newEnv(t, onBus(startNATS(t)), onPostgres(&pg), func(o *envOptions) { o.logs = &logs })
	b := a.sibling()
	var calls atomic.Int32
	a.startAgent(core.Options{}, func(ag *core.Agent) {
		must(t, core.AddTool(ag, "count", "Counts its calls.", func(ctx context.Context, _ struct{}) (string, error) {
			return strconv.Itoa(int(calls.Add(1))), nil
		}))
	})
	s := a.newRawSession(a.clientKey)
	viaB := *s
	viaB.url = b.url
	waitForPeer(t, b, s.id)
	if code, body := viaB.call(2, "count", `{}`); code != http.StatusOK || !strings.Contains(body, `"text":"1"`) {
		t.Fatalf("A's session through B: %d %s", code, body)
	}

	keyFile := a.cfg.SecretKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(filepath.Dir(a.dataPath), gateway.DefaultSecretKeyFile)
	}
	box, err := secrets.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	minuteAgo := cluster.NewForwardAuth(box, func() time.Time { return time.Now().Add(-time.Minute) })
	forged := []struct {
		name string
		mark func(r *http.Request)
	}{
		{"the header alone", func(r *http.Request) { r.Header.Set(cluster.ForwardedByHeader, "gw-forged") }},
		{"a made-up signature", func(r *http.Request) {
			r.Header.Set(cluster.ForwardedByHeader, "gw-forged")
			r.Header.Set(cluster.ForwardAuthHeader, "v1."+strconv.FormatInt(time.Now().Unix(), 10)+".bm90LWEtbWFj")
		}},
		{"a signature replayed a minute later", func(r *http.Request) { minuteAgo.Sign(r, "gw-forged") }},
	}
	for i, f := range forged {
		req, err := http.NewRequest(http.MethodPost, a.url+"/mcp", strings.NewReader(toolCall(10+i, "count", `{}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+a.clientKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		f.mark(req)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := answer(t, resp); resp.StatusCode != http.StatusForbidden || body != wantForwardRefused {
			t.Errorf("%s: %d %s", f.name, resp.StatusCode, body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the agent ran %d calls, want 1: a forged forward reached it", n)
	}
	// The session is untouched: its next call, through B, is its second.
	if code, body := viaB.call(20, "count", `{}`); code != http.StatusOK || !strings.Contains(body, `"text":"2"`) {
		t.Errorf("A's session through B after the forgeries: %d %s", code, body)
	}
	log := logs.String()
	if got := strings.Count(log, "refused a request forwarded by another gateway"); got != len(forged) {
		t.Errorf("%d refusals logged, want %d:\n%s", got, len(forged), log)
	}
	if !strings.Contains(log, "peer=127.0.0.1:") {
		t.Errorf("the refusals do not name the sender's address:\n%s", log)
	}
	for _, secret := range []string{a.clientKey, "gw-forged", "bm90LWEtbWFj"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds a header's value %q:\n%s", secret, log)
		}
	}
}

// A 2026-07-28 call waiting for its user on A, on PostgreSQL and NATS: its
// requestState (sealed with the key file the gateways share), retried
// through B, reaches A and the call completes; one altered is refused
// with the message clients read, through B as on A, and leaves the call
// waiting.
func TestClusterRequestStateRetriedElsewhere(t *testing.T) {
	t.Parallel()
	var pg string
	a := newEnv(t, onBus(startNATS(t)), onPostgres(&pg))
	b := a.sibling()
	a.startAgent(core.Options{}, func(ag *core.Agent) {
		must(t, core.AddTool(ag, "drop_order", "Drops an order after asking the user.", func(ctx context.Context, in GetOrderInput) (string, error) {
			ok, err := core.Confirm(ctx, "Drop order "+in.ID+"?")
			if err != nil || !ok {
				return "kept order " + in.ID, err
			}
			return "dropped order " + in.ID, nil
		}, core.Destructive()))
	})
	const caps = `{"elicitation":{}}`
	const args = `"name":"drop_order","arguments":{"id":"7"}`
	resp, body := modernCallCaps(t, a, a.clientKey, "tools/call", "drop_order", `{`+args+`}`, caps)
	var first struct {
		Result struct {
			InputRequests map[string]any `json:"inputRequests"`
			RequestState  string         `json:"requestState"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(sseData(body), &first) != nil || first.Result.RequestState == "" || len(first.Result.InputRequests) != 1 {
		t.Fatalf("first call = %d %s; want an input_required result", resp.StatusCode, body)
	}
	state := first.Result.RequestState
	waitForPeer(t, b, state)
	var input string
	for k := range first.Result.InputRequests {
		input = k
	}
	retry := func(e *env, state string) (string, string) {
		params := `{` + args + `,"requestState":"` + state + `","inputResponses":{"` + input + `":{"action":"accept","content":{"confirm":true}}}}`
		_, body := modernCallCaps(t, e, e.clientKey, "tools/call", "drop_order", params, caps)
		var out struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
			Error struct{ Message string } `json:"error"`
		}
		json.Unmarshal(sseData(body), &out)
		if len(out.Result.Content) > 0 {
			return out.Result.Content[0].Text, ""
		}
		return "", out.Error.Message
	}
	i, c := len(state)-3, "A"
	if state[i] == 'A' {
		c = "B"
	}
	tampered := state[:i] + c + state[i+1:]
	const wantRefused = "this requestState names no call waiting for input here: it ended or timed out, or the state was altered or is another client's. Call the tool again"
	for _, e := range []*env{b, a} {
		if text, msg := retry(e, tampered); msg != wantRefused {
			t.Errorf("an altered requestState sent to %s: %q, error %q", e.url, text, msg)
		}
	}
	if text, msg := retry(b, state); text != "dropped order 7" {
		t.Errorf("the requestState retried through B: %q, error %q", text, msg)
	}
}

// waitForPeer waits until e has heard, on the bus, the signed address of
// the gateway whose id starts id (a session id or a requestState), so
// that it forwards there.
func waitForPeer(t *testing.T, e *env, id string) {
	t.Helper()
	owner, _, _ := strings.Cut(id, ".")
	waitFor(t, "the other gateway to hear "+owner+" on the bus", func() bool {
		_, ok := e.gw.Cluster().PeerAddr(owner)
		return ok
	})
}
