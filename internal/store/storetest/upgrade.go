package storetest

import (
	"crypto/sha256"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

// PreMembersSeed is what a store might hold at the schema version before
// members, roles and the audit log (5 in SQLite, 3 in PostgreSQL): two people, two
// projects and an admin API token. The SQL takes "?" placeholders.
var PreMembersSeed = []struct {
	SQL  string
	Args []any
}{
	{`INSERT INTO projects (name, created_at) VALUES ('default', 0), ('shop', 0)`, nil},
	{`INSERT INTO users (email, email_key, password_hash, admin, created_at) VALUES ('ada@example.com', 'ada@example.com', 'h', TRUE, 0), ('bob@example.com', 'bob@example.com', 'h', FALSE, 0)`, nil},
	{`INSERT INTO api_tokens (id, hash, name, created_by, created_at) VALUES ('tok_old', ?, 'ci', 0, 0)`, []any{upgradeTokenHash()}},
}

func upgradeTokenHash() []byte {
	h := sha256.Sum256([]byte("old token"))
	return h[:]
}

// CheckUpgrade checks a store opened on PreMembersSeed: every existing user
// is an owner of every existing project, and the old token is still an
// instance token.
func CheckUpgrade(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	ps, err := s.Projects(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("Projects after upgrade = %v, %v; want default and shop", ps, err)
	}
	us, err := s.Users(ctx)
	if err != nil || len(us) != 2 {
		t.Fatalf("Users after upgrade = %v, %v; want ada and bob", us, err)
	}
	for _, u := range us {
		ms, err := s.Memberships(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 || ms[0].Role != store.RoleOwner || ms[1].Role != store.RoleOwner {
			t.Errorf("%s after upgrade is member of %+v; want owner of both projects", u.Email, ms)
		}
	}
	tok, err := s.APITokenByHash(ctx, upgradeTokenHash())
	if err != nil || tok.ID != "tok_old" || tok.ProjectID != 0 || tok.Role != "" || tok.Revoked() {
		t.Errorf("old token after upgrade = %+v, %v; want a live instance token", tok, err)
	}
	if es, err := s.Audit(ctx, store.AuditFilter{ProjectID: ps[0].ID}); err != nil || len(es) != 0 {
		t.Errorf("audit log after upgrade = %v, %v; want empty", es, err)
	}

	// The upgraded store keeps people's upstream accounts, and an old
	// user's go with them.
	mustKey(t, s, store.Key{ID: "key_upgraded", ProjectID: ps[0].ID, Kind: store.KindAgent}, "upgraded")
	a := store.UpstreamAccount{ProjectID: ps[0].ID, AgentKeyID: "key_upgraded", UserID: us[1].ID, Resource: "https://mcp.example.com/mcp", Access: []byte{1, 2, 3}}
	if err := s.PutUpstreamAccount(ctx, a); err != nil {
		t.Fatalf("PutUpstreamAccount after upgrade: %v", err)
	}
	if err := s.DeleteUser(ctx, us[1].ID); err != nil {
		t.Fatalf("DeleteUser after upgrade: %v", err)
	}
	if as, err := s.UpstreamAccounts(ctx, store.UpstreamFilter{}); err != nil || len(as) != 0 {
		t.Errorf("upstream accounts after deleting their user = %v, %v; want none", as, err)
	}
}
