package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// A 2025 session's tools/call is answered before go-sdk too (see
// internal/mcpfront/early.go and handoff.go). These tests hold its answers
// to go-sdk's for the same requests in the same session: the result and
// its errors, progress, log messages at the session's level, and a
// question for the client, which go-sdk takes over in the middle of the
// early answer.

// sessionEnv is a gateway with the tools of the session tests, and a raw
// session whose client declares elicitation.
func sessionEnv(t *testing.T) (*env, *rawSession) {
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		core.AddTool(a, "echo", "Echo q back.", func(ctx context.Context, in earlyIn) (earlyOut, error) {
			return earlyOut{A: in.Q, Note: `<i>&</i> café`}, nil
		})
		addCallTools(a)
		core.AddTool(a, "confirm", "Reports progress, asks, logs, answers.", func(ctx context.Context, in earlyIn) (string, error) {
			core.Progress(ctx, "checking "+in.Q)
			ok, err := core.Confirm(ctx, "Delete "+in.Q+"?")
			core.Log(ctx, core.LogWarning, "answered")
			core.Progress(ctx, "answered")
			return fmt.Sprint("deleted: ", ok), err
		})
		core.AddTool(a, "form", "Asks the user for a form.", func(ctx context.Context, in earlyIn) (string, error) {
			res, err := core.Elicit(ctx, "Your name?", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})
			return fmt.Sprintf("%s %v", res.Action, res.Content["name"]), err
		})
		core.AddTool(a, "long", "Waits to be cancelled.", func(ctx context.Context, in earlyIn) (string, error) {
			core.Progress(ctx, "started")
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(20 * time.Second):
				return "not cancelled", nil
			}
		})
	})
	init := strings.Replace(initializeBody, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	return e, e.newRawSessionWith(e.clientKey, init)
}

// sessionPost posts body in s and returns what the client reads.
func (e *env) sessionPost(s *rawSession, body string) rawAnswer {
	e.t.Helper()
	return e.post(map[string]string{"Mcp-Session-Id": s.id, "Mcp-Protocol-Version": "2025-11-25"}, body)
}

// TestEarlySessionCallsAnswerAsGoSDK: in a 2025-11-25 session a call that
// is not a cache hit is answered early, byte for byte as go-sdk answers
// the same call in the same session; log messages follow the level the
// client set with logging/setLevel.
func TestEarlySessionCallsAnswerAsGoSDK(t *testing.T) {
	t.Parallel()
	e, s := sessionEnv(t)
	const tokenS, tokenN = `,"_meta":{"progressToken":"tok-1"}`, `,"_meta":{"progressToken":42}`
	call := func(tool, args, meta, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":%q,"arguments":%s%s%s}}`, tool, args, meta, extra)
	}
	cases := []struct {
		name, level, tool, args, meta, want string
	}{
		{"a result", "", "echo", `{"q":"one"}`, "", `"structuredContent":{"a":"one","note":"\u003ci\u003e\u0026\u003c/i\u003e café"}`},
		{"a tool error", "", "fails", `{"q":"x"}`, "", `"isError":true`},
		{"refused arguments", "", "echo", `{"q":5}`, "", "Input validation error: Invalid arguments for tool echo"},
		{"no arguments", "", "echo", `null`, "", "Invalid arguments for tool echo"},
		{"a capability the client lacks", "", "sample", `{"q":"hi"}`, "", `the MCP client did not declare the sampling capability, so it cannot answer`},
		{"progress, then a result", "", "slow", `{"q":"x"}`, tokenS, `"method":"notifications/progress","params":{"progressToken":"tok-1","message":"step one <of> \"two\"","progress":1}`},
		{"progress with a number token", "", "slow", `{"q":"x"}`, tokenN, `"progressToken":42,"message":"step two","progress":2}`},
		{"no log messages before logging/setLevel", "", "logs", `{"q":"7"}`, "", `"text":"logged"`},
		{"log messages from info up", "info", "logs", `{"q":"7"}`, "", `"method":"notifications/message","params":{"data":{"note":"\"quoted\" \u0026 \u003cb\u003e","order":"7"},"level":"info"`},
		{"log messages at debug", "debug", "logs", `{"q":"7"}`, "", `"data":"debug \u003cdetail\u003e","level":"debug"`},
		{"log messages from warning up", "warning", "logs", `{"q":"7"}`, "", `"data":"warning","level":"warning"`},
		{"the request's own level is not the session's", "warning", "logs", `{"q":"7"}`, `,"_meta":{"io.modelcontextprotocol/logLevel":"debug"}`, `"data":"warning","level":"warning"`},
	}
	for _, c := range cases {
		if c.level != "" {
			if a := e.sessionPost(s, `{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"`+c.level+`"}}`); a.status != http.StatusOK {
				t.Fatalf("%s: logging/setLevel: %s", c.name, a)
			}
		}
		_, _, before := e.gw.EarlyStats()
		early := e.sessionPost(s, call(c.tool, c.args, c.meta, ""))
		_, _, after := e.gw.EarlyStats()
		// go-sdk takes params it does not know; the early path leaves such
		// a request to it.
		viaSDK := e.sessionPost(s, call(c.tool, c.args, c.meta, `,"spacefix-test":1`))
		if _, _, now := e.gw.EarlyStats(); after != before+1 || now != after {
			t.Errorf("%s: %d early answers, then %d for go-sdk's; want 1, 0", c.name, after-before, now-after)
		}
		if early.status != http.StatusOK || !strings.Contains(early.body, c.want) {
			t.Errorf("%s: %s; want 200 with %s", c.name, early, c.want)
		}
		if d := viaSDK.same(early); d != "" {
			t.Errorf("%s: go-sdk's answer and the early one differ: %s", c.name, d)
		}
		if strings.Contains(c.want, "debug") != strings.Contains(early.body, "debug") {
			t.Errorf("%s: debug messages %v; want %v: %s", c.name, !strings.Contains(c.want, "debug"), strings.Contains(c.want, "debug"), early)
		}
	}
}

// TestEarlySessionQuestionsAsked: when the agent of an early session call
// asks the client something, the early path asks on the call's own
// response, as go-sdk would: the client reads the progress line, then the
// elicitation request, and after its answer (POSTed to the session, 202)
// the rest of the call, exactly as go-sdk alone would have written them,
// its progress numbered on from before the question (MCP: the value
// increases with each notification).
func TestEarlySessionQuestionsAsked(t *testing.T) {
	t.Parallel()
	e, s := sessionEnv(t)
	if a := e.sessionPost(s, `{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`); a.status != http.StatusOK {
		t.Fatalf("logging/setLevel: %s", a)
	}
	serverID := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":(\d+),`)
	cases := []struct {
		name, tool, args, reply string
		want                    []string // in the events after the question, in order
	}{
		{"a confirmation accepted", "confirm", `{"q":"order 7"}`, `{"action":"accept","content":{"confirm":true}}`,
			[]string{`"data":"answered","level":"warning"`, `"message":"answered","progress":2}`, `"text":"deleted: true"`}},
		{"a confirmation declined", "confirm", `{"q":"order 8"}`, `{"action":"decline"}`,
			[]string{`"data":"answered","level":"warning"`, `"message":"answered","progress":2}`, `"text":"deleted: false"`}},
		{"a form", "form", `{"q":"x"}`, `{"action":"accept","content":{"name":"Ada"}}`,
			[]string{`"text":"accept Ada"`}},
	}
	for _, c := range cases {
		var answers [2][]string
		for i, extra := range []string{"", `,"spacefix-test":1`} {
			_, _, before := e.gw.EarlyStats()
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"p"}%s}}`, c.tool, c.args, extra)
			answers[i] = e.converse(s, body, c.reply)
			if _, _, now := e.gw.EarlyStats(); now-before != int64(1-i) {
				t.Errorf("%s: %d early answers; want %d", c.name, now-before, 1-i)
			}
			// go-sdk numbers its requests to the client per session.
			for j, ev := range answers[i] {
				answers[i][j] = serverID.ReplaceAllString(ev, `{"jsonrpc":"2.0","id":N,`)
			}
		}
		early, viaSDK := answers[0], answers[1]
		if fmt.Sprint(early) != fmt.Sprint(viaSDK) {
			t.Errorf("%s: the early answer and go-sdk's differ:\n%q\nvs\n%q", c.name, early, viaSDK)
		}
		q := slicesIndex(early, `"method":"elicitation/create"`)
		if q < 0 {
			t.Fatalf("%s: no elicitation request in %q", c.name, early)
		}
		if c.tool == "confirm" && (q != 1 || !strings.Contains(early[0], `"message":"checking `)) {
			t.Errorf("%s: events %q; want the progress line, then the question", c.name, early)
		}
		rest := early[q+1:]
		for _, w := range c.want {
			i := slicesIndex(rest, w)
			if i < 0 {
				t.Errorf("%s: %q after the question: %q", c.name, w, early[q+1:])
				break
			}
			rest = rest[i+1:]
		}
	}
}

// TestEarlySessionCallCancelled: the client's notifications/cancelled
// ends a call answered early, as it ends go-sdk's: the agent's handler
// sees its context end, the answer is the same, and the call log says
// cancelled.
func TestEarlySessionCallCancelled(t *testing.T) {
	t.Parallel()
	e, s := sessionEnv(t)
	var answers [2][]string
	for i, extra := range []string{"", `,"spacefix-test":1`} {
		_, _, before := e.gw.EarlyStats()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Each its own id: go-sdk may still be reading the first call's
		// notifications/cancelled when the second call comes.
		id := 9 + i
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"long","arguments":{"q":"x"},"_meta":{"progressToken":"p"}%s}}`, id, extra)
		resp, err := s.post(ctx, body)
		must(t, err)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			answers[i] = append(answers[i], strings.Replace(data, fmt.Sprintf(`"id":%d,`, id), `"id":N,`, 1))
			if len(answers[i]) == 1 { // the handler runs: cancel it
				if !strings.Contains(data, `"message":"started"`) {
					t.Fatalf("call %d: first event %s; want the progress line", i, data)
				}
				r, err := s.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"changed my mind"}}`, id))
				must(t, err)
				r.Body.Close()
				if r.StatusCode != http.StatusAccepted {
					t.Errorf("notifications/cancelled: %d", r.StatusCode)
				}
			}
		}
		resp.Body.Close()
		cancel()
		if _, _, now := e.gw.EarlyStats(); now-before != int64(1-i) {
			t.Errorf("%d early answers; want %d", now-before, 1-i)
		}
	}
	if fmt.Sprint(answers[0]) != fmt.Sprint(answers[1]) || len(answers[0]) == 0 || strings.Contains(answers[0][len(answers[0])-1], "not cancelled") {
		t.Errorf("the early answer and go-sdk's:\n%q\nvs\n%q", answers[0], answers[1])
	}
	waitFor(t, "two cancelled calls in the log", func() bool {
		n := 0
		for _, c := range e.calls() {
			if c.Outcome == store.OutcomeCancelled {
				n++
			}
		}
		return n == 2
	})
}

// converse posts a tools/call in s, answers the one request the server
// sends on its stream with reply, and returns the events read.
func (e *env) converse(s *rawSession, body, reply string) []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.post(ctx, body)
	must(e.t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var events []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events = append(events, data)
		if !strings.Contains(data, `"method":"elicitation/create"`) {
			continue
		}
		id := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":(\d+),`).FindStringSubmatch(data)
		if id == nil {
			e.t.Fatalf("a request without an id: %s", data)
		}
		r, err := s.post(ctx, `{"jsonrpc":"2.0","id":`+id[1]+`,"result":`+reply+`}`)
		must(e.t, err)
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			e.t.Fatalf("the answer to %s: %d", data, r.StatusCode)
		}
	}
	return events
}

// slicesIndex returns the index of the first of events containing s, or -1.
func slicesIndex(events []string, s string) int {
	for i, ev := range events {
		if strings.Contains(ev, s) {
			return i
		}
	}
	return -1
}

// TestEarlySessionAnswerOnlyFromItsSession: the response to a question an
// early call put to its client is taken only from that session: the same
// id POSTed in another session of the key, or in a session of another
// key, reaches nobody's call, and the call goes on waiting for its own
// client's answer.
func TestEarlySessionAnswerOnlyFromItsSession(t *testing.T) {
	t.Parallel()
	e, s := sessionEnv(t)
	init := strings.Replace(initializeBody, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	sibling := e.newRawSessionWith(e.clientKey, init)
	_, otherSecret := e.newKey(store.Key{Name: "someone else", Kind: store.KindClient, ProjectID: e.project.ID})
	stranger := e.newRawSessionWith(otherSecret, init)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.post(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"confirm","arguments":{"q":"order 9"}}}`)
	must(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var last string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = data
		id := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":(\d+),"method":"elicitation/create"`).FindStringSubmatch(data)
		if id == nil {
			continue
		}
		yes := `{"jsonrpc":"2.0","id":` + id[1] + `,"result":{"action":"accept","content":{"confirm":true}}}`
		no := strings.Replace(yes, "true", "false", 1)
		for _, other := range []*rawSession{sibling, stranger} {
			r, err := other.post(ctx, no)
			must(t, err)
			r.Body.Close()
		}
		r, err := s.post(ctx, yes)
		must(t, err)
		r.Body.Close()
		if r.StatusCode != http.StatusAccepted {
			t.Fatalf("the session's own answer: %d, want 202", r.StatusCode)
		}
	}
	if !strings.Contains(last, `"text":"deleted: true"`) {
		t.Errorf("the call ended with %s; want the session's own answer (yes) to count", last)
	}
}
