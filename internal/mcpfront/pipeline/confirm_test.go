package pipeline

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spacefix/spacefix/internal/access"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/changes"
	"github.com/spacefix/spacefix/internal/policy"
	"github.com/spacefix/spacefix/internal/secrets"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/teststores"
)

// twoGateways returns the call pipelines of two gateways on one store,
// sealing with the same secret key file, as a cluster's are.
func twoGateways(t *testing.T) (a, b *Pipeline) {
	t.Helper()
	ctx := context.Background()
	st := teststores.SQLite(t)
	calls := store.NewCallLog(st, nil)
	t.Cleanup(func() { calls.Close(ctx) })
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	box, _, err := secrets.LoadOrCreate(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	front := func(prefix string) *Pipeline {
		bus := changes.New(nil)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		return New(Options{Registry: agents.New(&agents.Options{Changes: bus}), Store: st,
			Controls: access.NewCache(st, time.Second, policy.Options{Log: log}), CallLog: calls, Logger: log,
			SessionPrefix: prefix, Secrets: box})
	}
	return front("gw-a."), front("gw-b.")
}

// A requestState one gateway sealed opens on another of the same key file:
// a task's names the task there, for the key it was sealed for only. One
// altered anywhere — its sealed part, or its prefix made another
// gateway's — is refused with the message clients read, as is a held
// call's state on a gateway that does not hold the call.
func TestRequestStateOpensOnEveryGateway(t *testing.T) {
	a, b := twoGateways(t)
	state := a.SealTaskState("task_1", "key_1")
	if !strings.HasPrefix(state, "gw-a."+taskStatePrefix) {
		t.Fatalf("state %q does not start with its gateway's prefix", state)
	}
	if id, ok := b.OpenTaskState(state, "key_1"); !ok || id != "task_1" {
		t.Errorf("B opens A's task state as %q, %v; want task_1, true", id, ok)
	}
	if _, ok := b.OpenTaskState(state, "key_2"); ok {
		t.Error("B opens A's task state for another client key")
	}

	held := a.held.seal(a.held.prefix, "call_1", "key_1")
	if _, id, keyID, ok := b.held.open(held); !ok || id != "call_1" || keyID != "key_1" {
		t.Errorf("B opens A's held-call state as %q, %q, %v", id, keyID, ok)
	}
	if _, err := b.held.resume(held, "key_1", "tool/t"); err == nil || err.Error() != ErrBadState.Error() {
		t.Errorf("B resumes a call A holds: %v", err)
	}

	i, c := len(held)-5, "A"
	if held[i] == 'A' {
		c = "B"
	}
	flipped := held[:i] + c + held[i+1:]
	for _, bad := range []string{
		flipped,
		"gw-b." + strings.TrimPrefix(held, "gw-a."),
		strings.Replace(state, taskStatePrefix, "", 1),
		"gw-a.not-a-state",
		"",
	} {
		for _, f := range []*Pipeline{a, b} {
			if _, err := f.held.resume(bad, "key_1", "tool/t"); err == nil || err.Error() != "this requestState names no call waiting for input here: it ended or timed out, or the state was altered or is another client's. Call the tool again" {
				t.Errorf("resume(%q) = %v", bad, err)
			}
			if _, ok := f.OpenTaskState(bad, "key_1"); ok {
				t.Errorf("OpenTaskState(%q) opened", bad)
			}
		}
	}
}
