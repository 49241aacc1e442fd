package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spacefix/spacefix/core"
	"github.com/spacefix/spacefix/internal/store"
)

// The gateway answers a cached tools/call before go-sdk parses it (see
// internal/mcpfront/early.go). These tests hold that answer to go-sdk's:
// the same bytes, for every era, and go-sdk's own answer for every request
// the early path must not take.

type earlyIn struct {
	Q string `json:"q"`
}

type earlyOut struct {
	A    string `json:"a"`
	Note string `json:"note"`
}

// earlyEnv is a gateway whose tool "echo" is cached; runs counts the
// agent's handler runs.
func earlyEnv(t *testing.T, opts ...func(*envOptions)) (*env, *atomic.Int64) {
	e := newEnv(t, opts...)
	var runs atomic.Int64
	e.startAgent(core.Options{}, func(a *core.Agent) {
		core.AddTool(a, "echo", "Echo q back.", func(ctx context.Context, in earlyIn) (earlyOut, error) {
			runs.Add(1)
			// HTML characters, quotes and non-ASCII: go-sdk escapes some of
			// them and not others; the early answer must do the same.
			return earlyOut{A: in.Q, Note: `<b>"fish" & chips</b> café 🐟`}, nil
		})
		core.AddTool(a, "uncached", "Not cached.", func(ctx context.Context, in earlyIn) (earlyOut, error) {
			return earlyOut{A: in.Q}, nil
		})
	})
	e.save(store.ToolSettings{Tool: "echo", CacheSeconds: 300})
	return e, &runs
}

// rawAnswer is what a client reads off the wire.
type rawAnswer struct {
	status int
	header http.Header
	body   string
}

func (a rawAnswer) String() string { return fmt.Sprintf("%d %q", a.status, a.body) }

// same reports how a and b differ in what a client sees: status, the
// response headers go-sdk sets, and the body byte for byte.
func (a rawAnswer) same(b rawAnswer) string {
	if a.status != b.status || a.body != b.body {
		return fmt.Sprintf("\n%s\nvs\n%s", a, b)
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Connection", "X-Accel-Buffering", "Mcp-Session-Id"} {
		if a.header.Get(h) != b.header.Get(h) {
			return fmt.Sprintf("header %s: %q vs %q", h, a.header.Get(h), b.header.Get(h))
		}
	}
	return ""
}

// post sends body to /mcp with the client key and the given headers.
func (e *env) post(header map[string]string, body string) rawAnswer {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/mcp", strings.NewReader(body))
	must(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.clientKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	must(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(e.t, err)
	return rawAnswer{resp.StatusCode, resp.Header, string(b)}
}

// modernHeaders are the headers of a 2026-07-28 tools/call of tool.
func modernHeaders(tool string) map[string]string {
	return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
}

const modernCallMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernCall is a 2026-07-28 tools/call body; extra goes into params.
func modernToolCall(id, tool, args, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,%s%s}}`, id, tool, args, modernCallMeta, extra)
}

func legacyCall(id, tool, args, extra string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, tool, args, extra)
}

// TestEarlyHitsAnswerAsGoSDK: in each era, a cached call answered early is
// byte for byte what go-sdk answers for the same request when the result
// comes from the agent (the miss) and when go-sdk serves the hit itself (a
// request the early path leaves to it); the agent runs once.
func TestEarlyHitsAnswerAsGoSDK(t *testing.T) {
	t.Parallel()
	e, runs := earlyEnv(t)
	sess := e.newRawSession(e.clientKey)
	eras := []struct {
		name   string
		header map[string]string
		body   func(id, args, extra string) string
	}{
		{"2026-07-28", modernHeaders("echo"), func(id, args, extra string) string { return modernToolCall(id, "echo", args, extra) }},
		{"2025-11-25 session", map[string]string{"Mcp-Session-Id": sess.id, "Mcp-Protocol-Version": "2025-11-25"},
			func(id, args, extra string) string { return legacyCall(id, "echo", args, extra) }},
		{"2025-11-25 session, no version header", map[string]string{"Mcp-Session-Id": sess.id},
			func(id, args, extra string) string { return legacyCall(id, "echo", args, extra) }},
	}
	for i, era := range eras {
		args := fmt.Sprintf(`{"q":"era %d"}`, i)
		for _, id := range []string{"7", `"call-1 with spaces"`, "-42"} {
			hits, earlyHits, earlyCalls := e.gw.EarlyStats()
			before := runs.Load()
			first := e.post(era.header, era.body(id, args, ""))
			if first.status != http.StatusOK || !strings.Contains(first.body, `"structuredContent":{"a":"era`) {
				t.Fatalf("%s id %s: %s", era.name, id, first)
			}
			again := e.post(era.header, era.body(id, args, ""))
			// go-sdk takes params it does not know; the early path leaves
			// such a request to it, so go-sdk serves this hit.
			viaSDK := e.post(era.header, era.body(id, args, `,"spacefix-test":1`))
			for what, a := range map[string]rawAnswer{"early hit": again, "go-sdk's hit": viaSDK} {
				if d := first.same(a); d != "" {
					t.Errorf("%s id %s: the %s differs from the first answer: %s", era.name, id, what, d)
				}
			}
			// The first id of each era is a miss (answered early too);
			// after it, the first call of each id is an early hit.
			want := [4]int64{0, 3, 2, 0} // agent runs, hits, early hits, other early calls
			if id == "7" {
				want = [4]int64{1, 2, 1, 1}
			}
			h, eh, ec := e.gw.EarlyStats()
			if got := [4]int64{runs.Load() - before, h - hits, eh - earlyHits, ec - earlyCalls}; got != want {
				t.Errorf("%s id %s: agent runs, hits, early hits, other early calls = %v; want %v", era.name, id, got, want)
			}
		}
	}
	// The same arguments spelled differently are the same cache entry.
	_, earlyHits, _ := e.gw.EarlyStats()
	a := e.post(modernHeaders("echo"), modernToolCall("7", "echo", `{ "q" : "era 0" }`, ""))
	if _, now, _ := e.gw.EarlyStats(); now != earlyHits+1 || !strings.Contains(a.body, `"a":"era 0"`) {
		t.Errorf("respelled arguments: %s, answered early %d times; want once", a, now-earlyHits)
	}
}

// TestEarlyHitsOfficialClients: go-sdk's client at every version reads
// early answers as it reads go-sdk's.
func TestEarlyHitsOfficialClients(t *testing.T) {
	t.Parallel()
	e, runs := earlyEnv(t)
	for _, v := range versions {
		cs := e.connect(v, e.clientKey, nil)
		args := map[string]any{"q": "client " + v}
		first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
		must(t, err)
		_, early, _ := e.gw.EarlyStats()
		second, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
		must(t, err)
		if _, now, _ := e.gw.EarlyStats(); now != early+1 {
			t.Errorf("%s: the second call was not answered early (%d)", v, now-early)
		}
		if got, want := fmt.Sprint(second.Content[0], second.StructuredContent, second.Meta), fmt.Sprint(first.Content[0], first.StructuredContent, first.Meta); got != want {
			t.Errorf("%s: hit %s, miss %s", v, got, want)
		}
	}
	if n := runs.Load(); n != int64(len(versions)) {
		t.Errorf("the agent ran %d times; want %d (one miss per version)", n, len(versions))
	}
}

// TestEarlyPathLeavesToGoSDK: requests the early path must not answer get
// go-sdk's answer, even when their tool's result is cached.
func TestEarlyPathLeavesToGoSDK(t *testing.T) {
	t.Parallel()
	e, runs := earlyEnv(t)
	sess := e.newRawSession(e.clientKey)
	const args = `{"q":"x"}`
	if a := e.post(modernHeaders("echo"), modernToolCall("1", "echo", args, "")); a.status != http.StatusOK {
		t.Fatalf("priming call: %s", a)
	}
	legacy := map[string]string{"Mcp-Session-Id": sess.id, "Mcp-Protocol-Version": "2025-11-25"}
	noMeta := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"q":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	cases := []struct {
		name   string
		header map[string]string
		body   string
		want   string // in go-sdk's answer
		status int
	}{
		{"Mcp-Name differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "other"},
			modernToolCall("2", "echo", args, ""), "Mcp-Name header value 'other' does not match body value 'echo'", http.StatusBadRequest},
		{"no Mcp-Method", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Name": "echo"},
			modernToolCall("2", "echo", args, ""), "missing required Mcp-Method header", http.StatusBadRequest},
		{"no client capabilities", modernHeaders("echo"), noMeta, `missing or invalid _meta field \"io.modelcontextprotocol/clientCapabilities\"`, http.StatusBadRequest},
		{"version header and _meta differ", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
			modernToolCall("2", "echo", args, ""), `"code":-32022,"message":"protocol version \"2025-11-25\" is not supported by this server"`, http.StatusBadRequest},
		{"Accept without SSE", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo", "Accept": "application/json"},
			modernToolCall("2", "echo", args, ""), "Accept must contain both", http.StatusBadRequest},
		{"Content-Type not JSON", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo", "Content-Type": "text/plain"},
			modernToolCall("2", "echo", args, ""), "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType},
		{"a batch", legacy, "[" + legacyCall("2", "echo", args, "") + "]", "batching is not supported", http.StatusBadRequest},
		{"an unknown session", map[string]string{"Mcp-Session-Id": "no-such-session", "Mcp-Protocol-Version": "2025-11-25"},
			legacyCall("2", "echo", args, ""), "session not found", http.StatusNotFound},
		{"a session request claiming 2026-07-28", legacy,
			legacyCall("2", "echo", args, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`),
			`"code":-32022`, http.StatusBadRequest},
	}
	early := func() int64 {
		_, hits, calls := e.gw.EarlyStats()
		return hits + calls
	}
	before := early()
	for _, c := range cases {
		a := e.post(c.header, c.body)
		if a.status != c.status || !strings.Contains(a.body, c.want) {
			t.Errorf("%s: %s; want %d with %q", c.name, a, c.status, c.want)
		}
		if now := early(); now != before {
			t.Errorf("%s: answered early", c.name)
			before = now
		}
	}

	// A deleted session is gone for cached calls too.
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+e.clientKey)
	req.Header.Set("Mcp-Session-Id", sess.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if a := e.post(legacy, legacyCall("3", "echo", args, "")); a.status != http.StatusNotFound {
		t.Errorf("a cached call in a deleted session: %s; want 404", a)
	}

	// A disabled tool is not found, cached or not.
	e.save(store.ToolSettings{Tool: "echo", CacheSeconds: 300, Disabled: true})
	if a := e.post(modernHeaders("echo"), modernToolCall("4", "echo", args, "")); !strings.Contains(a.body, "Tool echo not found") {
		t.Errorf("a disabled cached tool: %s", a)
	}
	if now := early(); now != before {
		t.Errorf("%d requests answered early; want none", now-before)
	}
	if runs.Load() != 1 {
		t.Errorf("the agent ran %d times; want 1 (the first call)", runs.Load())
	}
}

// TestEarlyHitsRateLimited: the rate limit counts early answers, and a hit
// over it gets the limit's message, as on go-sdk's path.
func TestEarlyHitsRateLimited(t *testing.T) {
	t.Parallel()
	e, runs := earlyEnv(t, func(o *envOptions) { o.settings = &store.ProjectSettings{RateLimitPerMinute: 3} })
	body := modernToolCall("1", "echo", `{"q":"limited"}`, "")
	for i := range 3 {
		if a := e.post(modernHeaders("echo"), body); strings.Contains(a.body, `"isError":true`) {
			t.Fatalf("call %d of 3: %s", i+1, a)
		}
	}
	hits, earlyHits, earlyCalls := e.gw.EarlyStats()
	a := e.post(modernHeaders("echo"), body)
	if !strings.Contains(a.body, `"isError":true`) || !strings.Contains(a.body, "Rate limit exceeded: this key may make 3 calls per minute. Try again in") ||
		!strings.Contains(a.body, `"resultType":"complete"`) {
		t.Errorf("fourth call: %s; want the rate limit's message", a)
	}
	// The first call was a miss (an early call), the next two early hits;
	// the fourth is refused before the cache.
	h, eh, ec := e.gw.EarlyStats()
	if got, want := [6]int64{hits, earlyHits, earlyCalls, h, eh, ec}, [6]int64{2, 2, 1, 2, 2, 2}; got != want || runs.Load() != 1 {
		t.Errorf("hits, early hits, other early calls before and after = %v, agent runs %d; want %v, 1", got, runs.Load(), want)
	}
	// Operators see the hits; the refused call is not one.
	wantMetric(t, e.scrape(e.adminToken()), 2, "spacefix_cache_hits_total")
}

// TestEarlyCallsAnswerAsGoSDK: a 2026-07-28 call that is not a cache hit
// is answered early too, and its answer — a result, a tool error, refused
// arguments, a question for the user, a protocol error with its HTTP
// status — is byte for byte what go-sdk answers for the same call (but
// the requestState, which is new for every question).
func TestEarlyCallsAnswerAsGoSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		core.AddTool(a, "echo", "Echo q back.", func(ctx context.Context, in earlyIn) (earlyOut, error) {
			return earlyOut{A: in.Q, Note: `<i>&</i>`}, nil
		})
		addCallTools(a)
		core.AddTool(a, "confirm", "Asks first.", func(ctx context.Context, in earlyIn) (string, error) {
			ok, err := core.Confirm(ctx, "Delete "+in.Q+"?")
			return fmt.Sprint("deleted: ", ok), err
		})
	})
	withCaps := func(caps string) string {
		return `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	// caps can carry more _meta: a progress token.
	const tokenS, tokenN = `{},"progressToken":"tok-1"`, `{},"progressToken":42`
	level := func(l string) string { return `{},"io.modelcontextprotocol/logLevel":` + l }
	body := func(tool, args, meta, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":%q,"arguments":%s%s%s}}`, tool, args, meta, extra)
	}
	state := regexp.MustCompile(`"requestState":"[^"]+"`)
	var questions []string // answers carrying a question, to answer
	cases := []struct {
		name, tool, args, caps, want string
		status                       int
	}{
		{"a result", "echo", `{"q":"one"}`, `{}`, `"structuredContent":{"a":"one","note":"\u003ci\u003e\u0026\u003c/i\u003e"}`, http.StatusOK},
		{"a tool error", "fails", `{"q":"x"}`, `{}`, `"isError":true`, http.StatusOK},
		{"refused arguments", "echo", `{"q":5}`, `{}`, "Input validation error: Invalid arguments for tool echo", http.StatusOK},
		{"no arguments", "echo", `null`, `{}`, "Invalid arguments for tool echo", http.StatusOK},
		{"a question for the user", "confirm", `{"q":"order 7"}`, `{"elicitation":{}}`, `"resultType":"input_required"`, http.StatusOK},
		{"a capability the client lacks", "sample", `{"q":"hi"}`, `{}`, `"code":-32021`, http.StatusBadRequest},
		{"progress, then a result", "slow", `{"q":"x"}`, tokenS, `"method":"notifications/progress","params":{"progressToken":"tok-1","message":"step one <of> \"two\"","progress":1}`, http.StatusOK},
		{"progress with a number token", "slow", `{"q":"x"}`, tokenN, `"progressToken":42,"message":"step two","progress":2}`, http.StatusOK},
		{"no progress without a token", "slow", `{"q":"x"}`, `{}`, `"text":"done"`, http.StatusOK},
		{"log messages from info up", "logs", `{"q":"7"}`, level(`"info"`), `"method":"notifications/message","params":{"data":{"note":"\"quoted\" \u0026 \u003cb\u003e","order":"7"},"level":"info"`, http.StatusOK},
		{"log messages at debug", "logs", `{"q":"7"}`, level(`"debug"`), `"data":"debug \u003cdetail\u003e","level":"debug"`, http.StatusOK},
		{"log messages from warning up", "logs", `{"q":"7"}`, level(`"warning"`), `"data":"warning","level":"warning"`, http.StatusOK},
		{"a level that is not a string", "logs", `{"q":"7"}`, level(`5`), `"text":"logged"`, http.StatusOK},
		{"no log messages without a level", "logs", `{"q":"7"}`, `{}`, `"text":"logged"`, http.StatusOK},
	}
	for _, c := range cases {
		_, _, before := e.gw.EarlyStats()
		early := e.post(modernHeaders(c.tool), body(c.tool, c.args, withCaps(c.caps), ""))
		_, _, after := e.gw.EarlyStats()
		viaSDK := e.post(modernHeaders(c.tool), body(c.tool, c.args, withCaps(c.caps), `,"spacefix-test":1`))
		if _, _, now := e.gw.EarlyStats(); after != before+1 || now != after {
			t.Errorf("%s: %d early answers, then %d for go-sdk's; want 1, 0", c.name, after-before, now-after)
		}
		if early.status != c.status || !strings.Contains(early.body, c.want) {
			t.Errorf("%s: %s; want %d with %s", c.name, early, c.status, c.want)
		}
		if c.tool == "confirm" {
			questions = append(questions, early.body, viaSDK.body)
		}
		early.body = state.ReplaceAllString(early.body, `"requestState":"…"`)
		viaSDK.body = state.ReplaceAllString(viaSDK.body, `"requestState":"…"`)
		if d := viaSDK.same(early); d != "" {
			t.Errorf("%s: go-sdk's answer and the early one differ: %s", c.name, d)
		}
	}
	// The answer comes back with requestState: go-sdk's path, where the
	// call held for it goes on.
	for i, q := range questions {
		reply := "decline"
		if i == 0 {
			reply = "accept"
		}
		a := e.post(modernHeaders("confirm"), body("confirm", `{"q":"order 7"}`, withCaps(`{"elicitation":{}}`), answerTo(t, q, reply)))
		if want := fmt.Sprint("deleted: ", reply == "accept"); !strings.Contains(a.body, want) {
			t.Errorf("the question answered with %s: %s; want %q", reply, a, want)
		}
	}
}

// addCallTools registers the tools the tests of early calls share: fails
// (a tool error), sample (asks the client's model), logs (at three levels)
// and slow (two progress lines).
func addCallTools(a *core.Agent) {
	core.AddTool(a, "fails", "Always fails.", func(ctx context.Context, in earlyIn) (string, error) {
		return "", fmt.Errorf("no order %q <here>", in.Q)
	})
	core.AddTool(a, "sample", "Asks the client's model.", func(ctx context.Context, in earlyIn) (string, error) {
		_, err := core.Sample(ctx, core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text(in.Q)}}, MaxTokens: 1})
		return "", err
	})
	core.AddTool(a, "logs", "Logs at three levels.", func(ctx context.Context, in earlyIn) (string, error) {
		core.Log(ctx, core.LogDebug, "debug <detail>")
		core.Log(ctx, core.LogInfo, map[string]any{"order": in.Q, "note": `"quoted" & <b>`})
		core.Log(ctx, core.LogWarning, "warning")
		return "logged", nil
	})
	core.AddTool(a, "slow", "Reports progress.", func(ctx context.Context, in earlyIn) (string, error) {
		core.Progress(ctx, `step one <of> "two"`)
		core.Progress(ctx, "step two")
		return "done", nil
	})
}

// answerTo is the params to add to a retry that answers the confirmation
// in answer (an SSE response carrying an input_required result) with
// action.
func answerTo(t *testing.T, answer, action string) string {
	t.Helper()
	data, _ := strings.CutPrefix(strings.TrimSpace(answer), "event: message\ndata: ")
	var msg struct {
		Result struct {
			InputRequests map[string]any `json:"inputRequests"`
			RequestState  string         `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil || len(msg.Result.InputRequests) != 1 {
		t.Fatalf("not one question: %s (%v)", answer, err)
	}
	for id := range msg.Result.InputRequests {
		content := ""
		if action == "accept" {
			content = `,"content":{"confirm":true}`
		}
		return fmt.Sprintf(`,"requestState":%q,"inputResponses":{%q:{"action":%q%s}}`, msg.Result.RequestState, id, action, content)
	}
	return ""
}

// TestEarlyProgressArrivesLive: a 2026-07-28 call answered early sends each
// progress line as it comes, while the tool still runs, not with the
// result; and a protocol error after such a line is one more SSE event.
// There the early answer differs from go-sdk v1.8.0 on purpose: go-sdk
// writes the error unframed after events, which no client can read.
func TestEarlyProgressArrivesLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{}, 1)
	e.startAgent(core.Options{}, func(a *core.Agent) {
		core.AddTool(a, "wait", "Reports progress, waits, then answers or asks the client's model.", func(ctx context.Context, in earlyIn) (string, error) {
			core.Progress(ctx, "started")
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if in.Q == "sample" {
				_, err := core.Sample(ctx, core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text(in.Q)}}, MaxTokens: 1})
				return "", err
			}
			return "released", nil
		})
	})
	token := e.adminToken()
	for _, c := range []struct{ q, last string }{
		{"x", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"spacefix","title":"Spacefix","version":"dev"}},"content":[{"type":"text","text":"released"}],"resultType":"complete"}}`},
		{"sample", `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"The tool needs the client's sampling capability, which this request did not declare.","data":{"requiredCapabilities":{"sampling":{}}}}}`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		body := modernToolCall("1", "wait", `{"q":"`+c.q+`"}`, "")
		body = strings.Replace(body, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"live"`, 1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/mcp", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+e.clientKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range modernHeaders("wait") {
			req.Header.Set(k, v)
		}
		_, _, before := e.gw.EarlyStats()
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		lines := bufio.NewScanner(resp.Body)
		var got []string
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				got = append(got, data)
				if len(got) == 1 {
					// The tool is still waiting: this line came on its own.
					if !strings.Contains(data, `"method":"notifications/progress","params":{"progressToken":"live","message":"started","progress":1}`) {
						t.Fatalf("q %s: first event %s; want the progress line", c.q, data)
					}
					// A stateless request being served counts as a session.
					wantMetric(t, e.scrape(token), 1, "spacefix_sessions", "era=2026-07-28")
					release <- struct{}{}
				}
			}
		}
		resp.Body.Close()
		cancel()
		if len(got) != 2 || got[1] != c.last {
			t.Errorf("q %s: events %q; want the progress line, then %s", c.q, got, c.last)
		}
		if _, _, now := e.gw.EarlyStats(); now != before+1 {
			t.Errorf("q %s: the call was not answered early", c.q)
		}
	}
}
