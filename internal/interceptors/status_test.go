package interceptors

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/testenv"
)

// TestChainStatus: a server at a URL is listed when first asked, with
// the entry's audit mode and failOpen applied to what it offers; one that
// refuses connections, a bridged agent not connected and one that is not
// bridged say why in a sentence; a server that answers 401 with the
// token it was sent does not put the token in the status.
func TestChainStatus(t *testing.T) {
	guardsURL := guards(t)
	gone := "http://" + testenv.RefusingAddr(t) + "/mcp"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad token "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer echo.Close()
	ag := piiAgent()
	c := New([]policy.Interceptor{
		{Name: "guards", URL: guardsURL, Mode: policy.Audit},
		{URL: gone, Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		{Name: "pii", Agent: "pii", FailOpen: true},
		{Agent: "shop"},
		{Agent: "nobody"},
		{Name: "echo", URL: echo.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}},
	}, Options{Agents: ag})
	defer c.Close()
	before := time.Now()
	got := c.Status(context.Background())
	audit := func(in Info) Info { in.Mode = policy.Audit; return in }
	want := []ServerStatus{
		{Label: "guards", URL: guardsURL, Listed: true, Interceptors: []Info{
			audit(Info{Name: "redact-emails", Type: Mutation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseResponse}, PriorityHint: Priority{Response: 10}}),
			audit(Info{Name: "mark-b", Type: Mutation, Hook: Hook{Events: []string{"tools/*"}, Phase: PhaseBoth}, PriorityHint: Priority{Request: 5, Response: -5}}),
			audit(Info{Name: "mark-a", Type: Mutation, Hook: Hook{Events: []string{"*"}, Phase: PhaseRequest}, PriorityHint: Priority{Request: 5}}),
			audit(Info{Name: "no-drop", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}),
			audit(Info{Name: "slow", Type: Validation, Hook: Hook{Events: []string{"tools/call"}, Phase: PhaseRequest}}),
			audit(Info{Name: "listing", Type: Validation, Hook: Hook{Events: []string{"tools/list"}, Phase: PhaseResponse}}),
		}},
		{Label: strings.TrimSuffix(strings.TrimPrefix(gone, "http://"), "/mcp"), URL: gone, Error: "Nothing answers at " + gone + " (connection refused): check that the server runs there."},
		{Label: "pii", Agent: "pii", Listed: true, Interceptors: []Info{{Name: "redact", Type: Mutation, Hook: redactInfo.Hook, FailOpen: true}}},
		{Label: "shop", Agent: "shop", Error: `The agent "shop" is not a bridged MCP server; only an agent run by spacefix bridge can serve interceptors.`},
		{Label: "nobody", Agent: "nobody", Error: `The bridged agent "nobody" is not connected, and the gateway reaches this server only through it: start spacefix bridge for it.`},
		{Label: "echo", URL: echo.URL, Error: echo.URL + " refused the gateway (Unauthorized): check the token in the entry's headers."},
	}
	for _, s := range got {
		if s.CheckedAt.Before(before) || s.CheckedAt.After(time.Now()) {
			t.Errorf("%s checked at %v, want during Status", s.Label, s.CheckedAt)
		}
		if strings.Contains(s.Error, "s3cret") {
			t.Errorf("%s: the error %q shows the token of the entry's header", s.Label, s.Error)
		}
	}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(ServerStatus{}, "CheckedAt")); d != "" {
		t.Errorf("Status (-want +got):\n%s", d)
	}

	// Asked again: a listed server is not listed again; its agent
	// connected again, it is.
	lists := ag.listed()
	c.Status(context.Background())
	if n := ag.listed() - lists; n != 0 {
		t.Errorf("the agents were asked %d times more while pii stayed connected, want 0", n)
	}
	ag.set("r-2", []Info{redactInfo, noCardInfo})
	if got := c.Status(context.Background()); len(got[2].Interceptors) != 2 || ag.listed()-lists != 1 {
		t.Errorf("after the agent reconnected: %+v (asked %d times more), want its 2 interceptors listed again, once", got[2], ag.listed()-lists)
	}
}
