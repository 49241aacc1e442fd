package sqlshared

import (
	"strings"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

func TestNumbered(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c > ?`, `SELECT a FROM t WHERE b = $1 AND c > $2`},
		{`INSERT INTO t (a, b) VALUES (?, '?')`, `INSERT INTO t (a, b) VALUES ($1, '?')`},
		{`SELECT "a?" FROM t WHERE x = ? LIMIT ?`, `SELECT "a?" FROM t WHERE x = $1 LIMIT $2`},
		{`UPDATE t SET a = 'it''s ?' WHERE id = ?`, `UPDATE t SET a = 'it''s ?' WHERE id = $1`},
	} {
		if got := Numbered(tc.in); got != tc.want {
			t.Errorf("Numbered(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestRebindAll(t *testing.T) {
	n := Q
	RebindAll(&n, Numbered)
	if n.KeyByHash == Q.KeyByHash || n.KeyByHash != Numbered(Q.KeyByHash) {
		t.Errorf("KeyByHash not rewritten: %q", n.KeyByHash)
	}
	if Q.KeyByHash != SelectKey+` WHERE k.hash = ?` {
		t.Errorf("RebindAll changed Q: %q", Q.KeyByHash)
	}
}

func TestCallsQuery(t *testing.T) {
	f := store.CallFilter{ProjectID: 3, Outcome: "ok", Limit: 5}
	q, args := CallsQuery(f, Dollar)
	want := SelectCalls + ` WHERE project_id = $1 AND outcome = $2 ORDER BY started_at DESC, id DESC LIMIT $3`
	if q != want || len(args) != 3 {
		t.Errorf("CallsQuery(Dollar) = %q, %v\nwant %q", q, args, want)
	}
	if q, _ := CallsQuery(f, Question); q != strings.NewReplacer("$1", "?", "$2", "?", "$3", "?").Replace(want) {
		t.Errorf("CallsQuery(Question) = %q", q)
	}
}

func TestUpstreamWhere(t *testing.T) {
	for _, tc := range []struct {
		f    store.UpstreamFilter
		want string
		args int
	}{
		{store.UpstreamFilter{}, ``, 0},
		{store.UpstreamFilter{ProjectID: 3}, ` WHERE project_id = $1`, 1},
		{store.UpstreamFilter{AgentKeyID: "key_a", UserID: 7}, ` WHERE agent_key_id = $1 AND user_id = $2`, 2},
		{store.UpstreamFilter{ProjectID: 3, AgentKeyID: "key_a", UserID: 7}, ` WHERE project_id = $1 AND agent_key_id = $2 AND user_id = $3`, 3},
	} {
		got, args := UpstreamWhere(tc.f, Dollar)
		if got != tc.want || len(args) != tc.args {
			t.Errorf("UpstreamWhere(%+v) = %q, %v; want %q with %d arguments", tc.f, got, args, tc.want, tc.args)
		}
	}
	if q, _ := UpstreamAccountsQuery(store.UpstreamFilter{UserID: 7}, Question); q != SelectUpstreamAccount+` WHERE user_id = ? ORDER BY agent_key_id, user_id` {
		t.Errorf("UpstreamAccountsQuery = %q", q)
	}
}
