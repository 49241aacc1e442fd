package e2e

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// bridgedPII reports whether the project has a connected bridged agent
// named pii.
func bridgedPII(e *env) bool {
	for _, r := range e.gw.Registry().Replicas(e.project.ID) {
		if r.Reg != nil && r.Reg.Name == "pii" && r.Reg.Bridge != nil {
			return true
		}
	}
	return false
}

// startPIIBridge runs `spacefix bridge` over stdio in front of
// examples/interceptor as the agent pii of e's project, with an agent key
// of its own, and waits until e's gateway has it.
func startPIIBridge(t *testing.T, e *env) (p *proc, logs *syncBuffer, key string) {
	t.Helper()
	_, key = e.newKey(store.Key{Kind: store.KindAgent, Name: "pii bridge"})
	cmd := exec.Command(binary(t, "../cmd/spacefix"), "bridge", "--url", e.url, "--key", key, "--name", "pii", "--",
		binary(t, "../examples/interceptor"), "-stdio")
	p, logs = startCmd(t, cmd)
	waitFor(t, "the bridge to connect", func() bool { return bridgedPII(e) })
	return p, logs, key
}

// TestPolicyInterceptorsOnBridge: the project's policy, saved through the
// API, names a bridged agent of the project as its interceptor server —
// `spacefix bridge` over stdio in front of examples/interceptor, which
// listens nowhere. A result is redacted and a call that carries a card
// number is blocked before it reaches the tool, in both eras and for a
// task's result; once the bridge is gone, the calls it hooked are refused
// (fail closed) with a sentence that says why, as they are when the
// policy names a plain SDK agent.
func TestPolicyInterceptorsOnBridge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pa := startPolicyAgent(e)
	p, logs, key := startPIIBridge(t, e)

	if code, body := e.putPolicy(`{"rules":[],"interceptors":[{"name":"pii","agent":"pii","timeout":"5s"}]}`); code != http.StatusOK {
		t.Fatalf("PUT the policy: %d %s", code, body)
	}
	probe := e.connect("2026-07-28", e.clientKey, nil)
	waitFor(t, "the gateway to apply the policy", func() bool {
		r, err := tryCall(probe, "profile", map[string]any{})
		return err == nil && strings.Contains(text(r), "[redacted]")
	})
	for _, v := range eras {
		t.Run(v, func(t *testing.T) {
			cs := e.connect(v, e.clientKey, nil)
			r := call(t, cs, "profile", map[string]any{})
			if r.IsError || strings.Contains(text(r), "ann@") || !strings.Contains(text(r), "[redacted]") {
				t.Errorf("profile = %q (isError %v), want the address redacted", text(r), r.IsError)
			}
			if sc, _ := r.StructuredContent.(map[string]any); sc["email"] != "[redacted]" || sc["name"] != "Ann" {
				t.Errorf("profile's structuredContent = %v, want the address redacted and the name kept", r.StructuredContent)
			}
			before := pa.pay.Load()
			const blocked = `This call was refused by interceptor "no-card-numbers": the arguments carry a card number; send its last four digits instead`
			if r := call(t, cs, "pay", map[string]any{"amount": 5, "note": "card 4111 1111 1111 1111"}); !r.IsError || text(r) != blocked {
				t.Errorf("pay with a card number = %q (isError %v), want %q", text(r), r.IsError, blocked)
			}
			if n := pa.pay.Load() - before; n != 0 {
				t.Errorf("the blocked call reached the tool %d times", n)
			}
			if r := call(t, cs, "pay", map[string]any{"amount": 5, "note": "card ending 1111"}); r.IsError || text(r) != "paid 5 (card ending 1111)" {
				t.Errorf("pay without a card number = %q (isError %v)", text(r), r.IsError)
			}
		})
	}

	// A task's result passes through the bridged interceptor when it ends.
	t.Run("2026-07-28 task", func(t *testing.T) {
		c := e.extClient(e.clientKey)
		task := c.start("report", map[string]any{})
		id, _ := task["taskId"].(string)
		if got := resultText(c.waitStatus(id, "completed")); got != "Report for [redacted]: 3 orders." {
			t.Errorf("the task's result = %q, want the address redacted", got)
		}
	})

	p.term()
	p.wait(t)
	waitFor(t, "the gateway to see the bridge gone", func() bool { return !bridgedPII(e) })
	cs := e.connect("2025-11-25", e.clientKey, nil)
	const gone = `This call was refused: the interceptor server "pii" of the project's policy is the bridged agent "pii", which is not connected.`
	if r := call(t, cs, "profile", map[string]any{}); !r.IsError || text(r) != gone {
		t.Errorf("profile with the bridge gone = %q (isError %v), want %q", text(r), r.IsError, gone)
	}
	// A plain SDK agent serves no interceptors: refused at call time.
	if code, body := e.putPolicy(`{"rules":[],"interceptors":[{"agent":"shop"}]}`); code != http.StatusOK {
		t.Fatalf("PUT a policy naming a plain agent: %d %s", code, body)
	}
	const plain = `This call was refused: the interceptor server "shop" of the project's policy is the agent "shop", which is not a bridged MCP server; only an agent run by spacefix bridge can serve interceptors.`
	poll(t, "the refusal of an interceptor on a plain agent", 0, func() (string, bool) {
		r := call(t, cs, "profile", map[string]any{})
		return text(r), r.IsError && text(r) == plain
	})
	if strings.Contains(logs.String(), key) {
		t.Errorf("the bridge logged its agent key")
	}
}

// TestPolicyInterceptorsOnBridgeOverBus: the bridge holds its connection
// to gateway A; a client of gateway B has its result redacted and its
// call blocked by it, the interceptor's requests crossing the bus.
func TestPolicyInterceptorsOnBridgeOverBus(t *testing.T) {
	t.Parallel()
	a := newEnv(t, onBus(startNATS(t)))
	b := a.sibling()
	pa := startPolicyAgent(a)
	startPIIBridge(t, a)
	waitFor(t, "B to hear of the bridge on A", func() bool { return bridgedPII(b) })
	if code, body := a.putPolicy(`{"rules":[],"interceptors":[{"name":"pii","agent":"pii","timeout":"5s"}]}`); code != http.StatusOK {
		t.Fatalf("PUT the policy: %d %s", code, body)
	}
	cs := b.connect("2026-07-28", b.clientKey, nil)
	poll(t, "B to redact profile through the bridge on A", 0, func() (string, bool) {
		r := call(t, cs, "profile", map[string]any{})
		return text(r), !r.IsError && strings.Contains(text(r), "[redacted]") && !strings.Contains(text(r), "ann@")
	})
	before := pa.pay.Load()
	const blocked = `This call was refused by interceptor "no-card-numbers": the arguments carry a card number; send its last four digits instead`
	if r := call(t, cs, "pay", map[string]any{"amount": 5, "note": "card 4111 1111 1111 1111"}); !r.IsError || text(r) != blocked {
		t.Errorf("pay with a card number through B = %q (isError %v), want %q", text(r), r.IsError, blocked)
	}
	if n := pa.pay.Load() - before; n != 0 {
		t.Errorf("the blocked call reached the tool %d times", n)
	}
}
