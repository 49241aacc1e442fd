// Package storetest is the contract suite every [store.Store]
// implementation runs, so that SQLite and PostgreSQL behave alike.
//
// Beyond what the [store.Store] docs say, the suite pins down:
//   - times come back in UTC at millisecond precision, durations at
//     microsecond precision;
//   - records of the same time come back newest-inserted first;
//   - empty lists (Tools, Progress) may come back as nil;
//   - UpdateProjectSettings on an unknown project returns [store.ErrNotFound];
//   - a second RevokeKey keeps the time of the first, and so does a second
//     RevokeAPIToken;
//   - tool settings and approvals come back sorted by tool name.
package storetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spacefix/spacefix/internal/store"
)

// Run runs the contract suite against the implementation open returns.
// open must return a new, empty store on every call and close it when t
// ends (t.Cleanup); the suite may close it first, since Close is safe twice.
// Subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Projects", testProjects},
		{"Tasks", testTasks},
		{"TaskEnds", testTaskEnds},
		{"TaskList", testTaskList},
		{"TaskPrune", testTaskPrune},
		{"RunningTasks", testRunningTasks},
		{"TaskFailGateway", testTaskFailGateway},
		{"RunningTaskCount", testRunningTaskCount},
		{"TaskSweeps", testTaskSweeps},
		{"TaskCall", testTaskCall},
		{"ProjectSettings", testProjectSettings},
		{"Keys", testKeys},
		{"KeyErrors", testKeyErrors},
		{"KeyTools", testKeyTools},
		{"RevokeKey", testRevokeKey},
		{"CallRoundTrip", testCallRoundTrip},
		{"CallErrorTruncated", testCallErrorTruncated},
		{"CallFilters", testCallFilters},
		{"CallDefaultLimit", testCallDefaultLimit},
		{"Usage", testUsage},
		{"UsageDays", testUsageDays},
		{"PruneCalls", testPruneCalls},
		{"ConcurrentAppendCalls", testConcurrentAppendCalls},
		{"AppendCallsBatchOnce", testAppendCallsBatchOnce},
		{"AppendManyCalls", testAppendManyCalls},
		{"CloseTwice", testCloseTwice},
		{"Check", testCheck},
		{"CallAfterID", testCallAfterID},
		{"KeyMeta", testKeyMeta},
		{"KeyIdentityAudience", testKeyIdentityAudience},
		{"ToolSettings", testToolSettings},
		{"ToolSettingsErrors", testToolSettingsErrors},
		{"Approvals", testApprovals},
		{"Users", testUsers},
		{"Sessions", testSessions},
		{"Invites", testInvites},
		{"InviteUsedOnce", testInviteUsedOnce},
		{"APITokens", testAPITokens},
		{"Meta", testMeta},
		{"SwapMeta", testSwapMeta},
		{"Gateways", testGateways},
		{"OAuthClients", testOAuthClients},
		{"OAuthClientPrune", testOAuthClientPrune},
		{"OAuthGrants", testOAuthGrants},
		{"OAuthTokens", testOAuthTokens},
		{"OAuthTokenUsedOnce", testOAuthTokenUsedOnce},
		{"Members", testMembers},
		{"ScopedTokensAndInvites", testScopedTokensAndInvites},
		{"AcceptInvite", testAcceptInvite},
		{"Audit", testAudit},
		{"UserAdminAndDelete", testUserAdminAndDelete},
		{"RequestClaim", testRequestClaim},
		{"RequestClaimRace", testRequestClaimRace},
		{"RequestReclaim", testRequestReclaim},
		{"RequestExpiry", testRequestExpiry},
		{"RequestCallLog", testRequestCallLog},
		{"UpstreamAccounts", testUpstreamAccounts},
		{"UpstreamAccountRefs", testUpstreamAccountRefs},
		{"UpstreamFilters", testUpstreamFilters},
		{"UpstreamCascades", testUpstreamCascades},
		{"UpstreamUpdateRace", testUpstreamUpdateRace},
		{"UpstreamPutRevokeRace", testUpstreamPutRevokeRace},
		{"UpstreamClients", testUpstreamClients},
		{"IdPs", testIdPs},
		{"UsedOnce", testUsedOnce},
		{"Policies", testPolicies},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// hash is what the auth layer stores for a secret.
func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func mustProject(t *testing.T, s store.Store, name string) store.Project {
	t.Helper()
	p, err := s.CreateProject(t.Context(), name)
	if err != nil {
		t.Fatalf("CreateProject(%q): %v", name, err)
	}
	return p
}

func mustKey(t *testing.T, s store.Store, k store.Key, secret string) store.Key {
	t.Helper()
	got, err := s.CreateKey(t.Context(), k, hash(secret))
	if err != nil {
		t.Fatalf("CreateKey(%q): %v", k.ID, err)
	}
	return got
}

func mustAppend(t *testing.T, s store.Store, calls ...store.Call) {
	t.Helper()
	if err := s.AppendCalls(t.Context(), calls); err != nil {
		t.Fatalf("AppendCalls: %v", err)
	}
}

// clock brackets a store call that sets a time, at the store's precision.
type clock struct{ before time.Time }

func startClock() clock { return clock{time.Now().Truncate(time.Millisecond)} }

// check fails unless tm was taken while the clock ran, and is in UTC.
func (c clock) check(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if after := time.Now(); tm.Before(c.before) || tm.After(after) {
		t.Errorf("%s = %v, want within [%v, %v]", what, tm, c.before, after)
	}
	checkUTC(t, what, tm)
}

func checkUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.Location() != time.UTC {
		t.Errorf("%s = %v is in %v, want UTC", what, tm, tm.Location())
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func testProjects(t *testing.T, s store.Store) {
	ctx := t.Context()
	if ps, err := s.Projects(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("Projects() on an empty store = %v, %v; want none", ps, err)
	}
	var created []store.Project
	for _, name := range []string{"orders", "billing", "Orders"} {
		clk := startClock()
		p := mustProject(t, s, name)
		clk.check(t, name+" CreatedAt", p.CreatedAt)
		if p.ID == 0 || p.Name != name || p.Settings != (store.ProjectSettings{}) {
			t.Errorf("CreateProject(%q) = %+v, want an id, the name and default settings", name, p)
		}
		created = append(created, p)
	}
	for _, p := range created {
		got, err := s.Project(ctx, p.Name)
		if err != nil {
			t.Fatalf("Project(%q): %v", p.Name, err)
		}
		if diff := gocmp.Diff(p, got); diff != "" {
			t.Errorf("Project(%q) mismatch (-want +got):\n%s", p.Name, diff)
		}
		checkUTC(t, "Project CreatedAt", got.CreatedAt)
		got, err = s.ProjectByID(ctx, p.ID)
		if err != nil {
			t.Fatalf("ProjectByID(%d): %v", p.ID, err)
		}
		if diff := gocmp.Diff(p, got); diff != "" {
			t.Errorf("ProjectByID(%d) mismatch (-want +got):\n%s", p.ID, diff)
		}
	}
	all, err := s.Projects(ctx)
	if err != nil {
		t.Fatalf("Projects: %v", err)
	}
	if diff := gocmp.Diff(created, all); diff != "" {
		t.Errorf("Projects() mismatch, want oldest first (-want +got):\n%s", diff)
	}

	_, err = s.CreateProject(ctx, "orders")
	wantErr(t, "CreateProject of a taken name", err, store.ErrExists)
	_, err = s.Project(ctx, "missing")
	wantErr(t, "Project(missing)", err, store.ErrNotFound)
	_, err = s.ProjectByID(ctx, created[2].ID+1000)
	wantErr(t, "ProjectByID(missing)", err, store.ErrNotFound)
}

func testProjectSettings(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	other := mustProject(t, s, "billing")
	for _, tt := range []struct {
		name     string
		settings store.ProjectSettings
	}{
		{"every field", store.ProjectSettings{
			CallWaitMs: 5000, ReadOnlyClients: true, MaxTools: 10,
			MaxSchemaBytes: 1024, MaxResources: 20, MaxRegistrationBytes: 4096,
			ApproveToolChanges: true, RateLimitPerMinute: 60,
		}},
		{"one field", store.ProjectSettings{CallWaitMs: 1000}},
		{"back to defaults", store.ProjectSettings{}},
	} {
		if err := s.UpdateProjectSettings(ctx, p.ID, tt.settings); err != nil {
			t.Fatalf("%s: UpdateProjectSettings: %v", tt.name, err)
		}
		byName, err := s.Project(ctx, p.Name)
		if err != nil {
			t.Fatalf("%s: Project: %v", tt.name, err)
		}
		byID, err := s.ProjectByID(ctx, p.ID)
		if err != nil {
			t.Fatalf("%s: ProjectByID: %v", tt.name, err)
		}
		if diff := gocmp.Diff(tt.settings, byName.Settings); diff != "" {
			t.Errorf("%s: Project settings mismatch (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.settings, byID.Settings); diff != "" {
			t.Errorf("%s: ProjectByID settings mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	if err := s.UpdateProjectSettings(ctx, p.ID, store.ProjectSettings{MaxTools: 3}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Project(ctx, other.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Settings != (store.ProjectSettings{}) {
		t.Errorf("settings of an untouched project = %+v, want defaults", got.Settings)
	}
	err = s.UpdateProjectSettings(ctx, other.ID+1000, store.ProjectSettings{MaxTools: 3})
	wantErr(t, "UpdateProjectSettings of a missing project", err, store.ErrNotFound)
}

func testKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	orders := mustProject(t, s, "orders")
	billing := mustProject(t, s, "billing")
	in := []struct {
		key    store.Key
		secret string
	}{
		{store.Key{ID: "key_agent", ProjectID: orders.ID, Kind: store.KindAgent, Name: "orders agent"}, "sfa_one"},
		{store.Key{ID: "key_ro", ProjectID: orders.ID, Kind: store.KindClient, Name: "reader", ReadOnly: true}, "sfc_two"},
		{store.Key{ID: "key_tools", ProjectID: orders.ID, Kind: store.KindClient, Tools: []string{"search_orders", "get_order"}}, "sfc_three"},
		{store.Key{ID: "key_billing", ProjectID: billing.ID, Kind: store.KindClient, Name: "ci"}, "sfc_four"},
	}
	var created []store.Key
	for _, k := range in {
		clk := startClock()
		got := mustKey(t, s, k.key, k.secret)
		clk.check(t, k.key.ID+" CreatedAt", got.CreatedAt)
		want := k.key
		want.ProjectName = orders.Name
		if k.key.ProjectID == billing.ID {
			want.ProjectName = billing.Name
		}
		want.CreatedAt = got.CreatedAt
		if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("CreateKey(%q) mismatch (-want +got):\n%s", k.key.ID, diff)
		}
		if got.Revoked() {
			t.Errorf("CreateKey(%q) returned a revoked key", k.key.ID)
		}
		created = append(created, got)
	}
	for i, k := range in {
		got, err := s.KeyByHash(ctx, hash(k.secret))
		if err != nil {
			t.Fatalf("KeyByHash(%q): %v", k.secret, err)
		}
		if diff := gocmp.Diff(created[i], got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("KeyByHash(%q) mismatch (-want +got):\n%s", k.secret, diff)
		}
		checkUTC(t, "KeyByHash CreatedAt", got.CreatedAt)
		got, err = s.Key(ctx, k.key.ID)
		if err != nil {
			t.Fatalf("Key(%q): %v", k.key.ID, err)
		}
		if diff := gocmp.Diff(created[i], got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Key(%q) mismatch (-want +got):\n%s", k.key.ID, diff)
		}
	}
	for _, tt := range []struct {
		project int64
		want    []store.Key
	}{
		{orders.ID, created[:3]},
		{billing.ID, created[3:]},
		{0, created},
	} {
		got, err := s.Keys(ctx, tt.project)
		if err != nil {
			t.Fatalf("Keys(%d): %v", tt.project, err)
		}
		if diff := gocmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Keys(%d) mismatch, want oldest first (-want +got):\n%s", tt.project, diff)
		}
	}
}

func testKeyErrors(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	mustKey(t, s, store.Key{ID: "key_a", ProjectID: p.ID, Kind: store.KindClient}, "secret_a")
	for _, tt := range []struct {
		name string
		key  store.Key
		hash []byte
		want error // nil: any error
	}{
		{"taken id", store.Key{ID: "key_a", ProjectID: p.ID, Kind: store.KindClient}, hash("other"), store.ErrExists},
		{"taken hash", store.Key{ID: "key_b", ProjectID: p.ID, Kind: store.KindClient}, hash("secret_a"), store.ErrExists},
		{"missing project", store.Key{ID: "key_c", ProjectID: p.ID + 1000, Kind: store.KindClient}, hash("c"), store.ErrNotFound},
		{"no id", store.Key{ProjectID: p.ID, Kind: store.KindClient}, hash("d"), nil},
		{"no project", store.Key{ID: "key_e", Kind: store.KindClient}, hash("e"), nil},
		{"bad kind", store.Key{ID: "key_f", ProjectID: p.ID, Kind: "admin"}, hash("f"), nil},
		{"no hash", store.Key{ID: "key_g", ProjectID: p.ID, Kind: store.KindAgent}, nil, nil},
	} {
		_, err := s.CreateKey(ctx, tt.key, tt.hash)
		switch {
		case err == nil:
			t.Errorf("CreateKey with %s succeeded, want an error", tt.name)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("CreateKey with %s: error %v, want %v", tt.name, err, tt.want)
		}
	}
	if ks, err := s.Keys(ctx, 0); err != nil || len(ks) != 1 {
		t.Errorf("Keys after failed creates = %d keys, %v; want only the first", len(ks), err)
	}
	_, err := s.KeyByHash(ctx, hash("unknown"))
	wantErr(t, "KeyByHash(unknown)", err, store.ErrNotFound)
	_, err = s.Key(ctx, "key_unknown")
	wantErr(t, "Key(unknown)", err, store.ErrNotFound)
}

func testKeyTools(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	for i, tools := range [][]string{
		nil,
		{},
		{"get_order"},
		{"search_orders", "get_order", "cancel_order"}, // order kept
		{"bridge__tool", "test_radar_run_tests", "a-b", "Z"},
		{`odd "quoted"`, "ünïcode", "comma,and]bracket"},
	} {
		id := "key_" + string(rune('a'+i))
		mustKey(t, s, store.Key{ID: id, ProjectID: p.ID, Kind: store.KindClient, Tools: tools}, id)
		byID, err := s.Key(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		byHash, err := s.KeyByHash(ctx, hash(id))
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(tools, byID.Tools, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Key(%q).Tools mismatch (-want +got):\n%s", id, diff)
		}
		if diff := gocmp.Diff(tools, byHash.Tools, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("KeyByHash(%q).Tools mismatch (-want +got):\n%s", id, diff)
		}
	}
}

func testRevokeKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	k := mustKey(t, s, store.Key{ID: "key_a", ProjectID: p.ID, Kind: store.KindClient}, "a")
	other := mustKey(t, s, store.Key{ID: "key_b", ProjectID: p.ID, Kind: store.KindClient}, "b")

	clk := startClock()
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatalf("RevokeKey: %v", err)
	}
	got, err := s.KeyByHash(ctx, hash("a"))
	if err != nil {
		t.Fatalf("KeyByHash of a revoked key: %v, want the key", err)
	}
	if !got.Revoked() {
		t.Fatalf("KeyByHash after RevokeKey: not revoked")
	}
	clk.check(t, "RevokedAt", got.RevokedAt)
	want := k
	want.RevokedAt = got.RevokedAt
	if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("revoked key mismatch (-want +got):\n%s", diff)
	}

	time.Sleep(2 * time.Millisecond) // a second revocation must not move the time
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Errorf("RevokeKey twice: %v, want nil", err)
	}
	again, err := s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !again.RevokedAt.Equal(got.RevokedAt) {
		t.Errorf("RevokedAt after a second RevokeKey = %v, want %v", again.RevokedAt, got.RevokedAt)
	}
	if o, err := s.Key(ctx, other.ID); err != nil || o.Revoked() {
		t.Errorf("other key after RevokeKey: %+v, %v; want live", o, err)
	}
	wantErr(t, "RevokeKey(unknown)", s.RevokeKey(ctx, "key_unknown"), store.ErrNotFound)
}

// at is a fixed instant, at millisecond precision, to build records on.
var at = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func testCallRoundTrip(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	in := []store.Call{
		{
			Time: at.In(time.FixedZone("UTC+5", 5*3600)), ProjectID: p.ID, Kind: "tool", Name: "search_orders",
			KeyID: "key_c", Agent: "key_a", Replica: "rep_1", Duration: 1234567 * time.Microsecond,
			Outcome: store.OutcomeError, Error: "upstream said no",
			Progress: []string{"1/3", `step "two" ✓`, "3/3"}, Billable: true,
			CallID: "c-abc-2", RetryOf: "c-abc-1", Policy: `deny by rule "amount-limit"`,
		},
		{
			Time: at.Add(time.Millisecond), ProjectID: p.ID, Kind: "resource", Name: "orders://recent",
			KeyID: "key_c", Agent: "key_a", Replica: "rep_2", Duration: 17 * time.Microsecond,
			Outcome: store.OutcomeOK,
		},
	}
	mustAppend(t, s, in...)
	if err := s.AppendCalls(t.Context(), nil); err != nil {
		t.Errorf("AppendCalls(nil): %v", err)
	}
	got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID})
	if err != nil {
		t.Fatalf("Calls: %v", err)
	}
	want := []store.Call{in[1], in[0]}
	if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(store.Call{}, "ID")); diff != "" {
		t.Errorf("Calls mismatch (-want +got):\n%s", diff)
	}
	for _, c := range got {
		checkUTC(t, "Call.Time", c.Time)
	}
	if len(got) == 2 && (got[0].ID == 0 || got[1].ID == 0 || got[0].ID == got[1].ID) {
		t.Errorf("call ids %d, %d; want distinct and non-zero", got[0].ID, got[1].ID)
	}
}

func testCallErrorTruncated(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	for _, tt := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "boom", "boom"},
		{"300 ascii", strings.Repeat("x", 300), strings.Repeat("x", 300)},
		{"301 ascii", strings.Repeat("x", 301), strings.Repeat("x", 300)},
		{"300 two-byte", strings.Repeat("é", 300), strings.Repeat("é", 300)},
		{"long two-byte", strings.Repeat("é", 400), strings.Repeat("é", 300)},
		{"long four-byte", strings.Repeat("a😀", 200), strings.Repeat("a😀", 150)},
		// An agent's error text may hold what PostgreSQL refuses in TEXT
		// (a NUL, bytes that are not UTF-8); refusing the whole batch would
		// stall the call log, which retries it.
		{"nul and bad bytes", "a\x00b\xffc", "a\uFFFDb\uFFFDc"},
	} {
		mustAppend(t, s, store.Call{Time: at, ProjectID: p.ID, Kind: "tool", Name: tt.name, Outcome: store.OutcomeError, Error: tt.in})
		got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID, Name: tt.name})
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: Calls = %d records, %v; want 1", tt.name, len(got), err)
		}
		if e := got[0].Error; e != tt.want {
			t.Errorf("%s: stored error has %d characters (valid UTF-8: %v), want %d",
				tt.name, utf8.RuneCountInString(e), utf8.ValidString(e), utf8.RuneCountInString(tt.want))
		}
	}
}

func testCallFilters(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	q := mustProject(t, s, "billing")
	mk := func(min int, project int64, name, outcome, key string) store.Call {
		return store.Call{
			Time: at.Add(time.Duration(min) * time.Minute), ProjectID: project, Kind: "tool", Name: name,
			KeyID: key, Agent: "key_agent", Replica: "rep", Outcome: outcome, Billable: true,
		}
	}
	calls := []store.Call{
		0: mk(0, p.ID, "search", store.OutcomeOK, "k1"),
		1: mk(1, p.ID, "get", store.OutcomeError, "k2"),
		2: mk(2, p.ID, "search", store.OutcomeTimeout, "k1"),
		3: mk(3, q.ID, "search", store.OutcomeOK, "k3"),
		4: mk(4, p.ID, "get", store.OutcomeOK, "k2"),
		5: mk(5, p.ID, "search", store.OutcomeOK, "k2"),
		6: mk(5, p.ID, "get", store.OutcomeCancelled, "k1"), // same time as 5, inserted later
	}
	mustAppend(t, s, calls[:4]...) // two batches: order must not depend on them
	mustAppend(t, s, calls[4:]...)
	for _, tt := range []struct {
		name   string
		filter store.CallFilter
		want   []int
	}{
		{"everything", store.CallFilter{}, []int{6, 5, 4, 3, 2, 1, 0}},
		{"project", store.CallFilter{ProjectID: p.ID}, []int{6, 5, 4, 2, 1, 0}},
		{"other project", store.CallFilter{ProjectID: q.ID}, []int{3}},
		{"name", store.CallFilter{ProjectID: p.ID, Name: "search"}, []int{5, 2, 0}},
		{"name across projects", store.CallFilter{Name: "search"}, []int{5, 3, 2, 0}},
		{"outcome", store.CallFilter{ProjectID: p.ID, Outcome: store.OutcomeOK}, []int{5, 4, 0}},
		{"key", store.CallFilter{ProjectID: p.ID, KeyID: "k2"}, []int{5, 4, 1}},
		{"since is inclusive", store.CallFilter{ProjectID: p.ID, Since: calls[2].Time}, []int{6, 5, 4, 2}},
		{"since in another zone", store.CallFilter{ProjectID: p.ID, Since: calls[4].Time.In(time.FixedZone("", -7*3600))}, []int{6, 5, 4}},
		{"limit", store.CallFilter{ProjectID: p.ID, Limit: 2}, []int{6, 5}},
		{"combined", store.CallFilter{ProjectID: p.ID, Name: "search", Outcome: store.OutcomeOK, Since: calls[1].Time}, []int{5}},
		{"combined with limit", store.CallFilter{Name: "get", KeyID: "k2", Limit: 1}, []int{4}},
		{"no match", store.CallFilter{ProjectID: p.ID, Name: "missing"}, nil},
		{"since after all", store.CallFilter{Since: at.Add(time.Hour)}, nil},
	} {
		got, err := s.Calls(t.Context(), tt.filter)
		if err != nil {
			t.Fatalf("%s: Calls: %v", tt.name, err)
		}
		var want []store.Call
		for _, i := range tt.want {
			want = append(want, calls[i])
		}
		if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(store.Call{}, "ID")); diff != "" {
			t.Errorf("%s: Calls(%+v) mismatch, want newest first (-want +got):\n%s", tt.name, tt.filter, diff)
		}
	}
}

func testCallDefaultLimit(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	calls := make([]store.Call, 130)
	for i := range calls {
		calls[i] = store.Call{Time: at.Add(time.Duration(i) * time.Second), ProjectID: p.ID, Kind: "tool", Name: "t", Outcome: store.OutcomeOK}
	}
	mustAppend(t, s, calls...)
	for _, tt := range []struct {
		limit, want int
	}{{0, 100}, {-1, 100}, {120, 120}, {1000, 130}} {
		got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID, Limit: tt.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.want {
			t.Errorf("Calls with Limit %d = %d records, want %d", tt.limit, len(got), tt.want)
		}
		if len(got) > 0 && !got[0].Time.Equal(calls[len(calls)-1].Time) {
			t.Errorf("Calls with Limit %d starts at %v, want the newest", tt.limit, got[0].Time)
		}
	}
}

func testUsage(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	q := mustProject(t, s, "billing")
	call := func(project int64, kind, name string, billable bool) store.Call {
		return store.Call{Time: at, ProjectID: project, Kind: kind, Name: name, Outcome: store.OutcomeOK, Billable: billable}
	}
	mustAppend(t, s,
		call(p.ID, "tool", "search_orders", true),
		call(p.ID, "tool", "search_orders", true),
		call(p.ID, "tool", "search_orders", false), // not billable: logged, not counted
		call(p.ID, "tool", "get_order", true),
		call(p.ID, "resource", "orders://recent", true),
		call(p.ID, "prompt", "summarise_order", true),
		call(p.ID, "tool", "never_billed", false),
		call(q.ID, "tool", "search_orders", true),
	)
	mustAppend(t, s, call(p.ID, "tool", "search_orders", true)) // counts add up across batches
	day := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		project int64
		want    []store.Usage
	}{
		{"project", p.ID, []store.Usage{
			{Day: day, Kind: "tool", Name: "get_order", Calls: 1},
			{Day: day, Kind: "resource", Name: "orders://recent", Calls: 1},
			{Day: day, Kind: "tool", Name: "search_orders", Calls: 3},
			{Day: day, Kind: "prompt", Name: "summarise_order", Calls: 1},
		}},
		{"other project", q.ID, []store.Usage{{Day: day, Kind: "tool", Name: "search_orders", Calls: 1}}},
		{"unknown project", q.ID + 1000, nil},
	} {
		got, err := s.Usage(t.Context(), tt.project, at, at)
		if err != nil {
			t.Fatalf("%s: Usage: %v", tt.name, err)
		}
		if diff := gocmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Usage mismatch (-want +got):\n%s", tt.name, diff)
		}
		for _, u := range got {
			checkUTC(t, "Usage.Day", u.Day)
		}
	}
	calls, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID})
	if err != nil || len(calls) != 8 {
		t.Errorf("Calls = %d records, %v; want 8, billable or not", len(calls), err)
	}
}

func testUsageDays(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	midnight := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	day := func(d int) time.Time { return midnight.AddDate(0, 0, d) }
	call := func(tm time.Time, name string) store.Call {
		return store.Call{Time: tm, ProjectID: p.ID, Kind: "tool", Name: name, Outcome: store.OutcomeOK, Billable: true}
	}
	mustAppend(t, s,
		call(midnight.Add(-time.Millisecond), "b"),                                      // 14th, last ms
		call(time.Date(2026, 3, 15, 1, 30, 0, 0, time.FixedZone("UTC+3", 3*3600)), "b"), // 14th 22:30 UTC
		call(midnight, "b"), // 15th, first ms
		call(midnight.Add(24*time.Hour-time.Millisecond), "a"),                           // 15th, last ms
		call(time.Date(2026, 3, 15, 20, 0, 0, 0, time.FixedZone("UTC-5", -5*3600)), "a"), // 16th 01:00 UTC
		call(day(1), "b"),                   // 16th
		call(day(2).Add(12*time.Hour), "a"), // 17th
	)
	u := func(d int, name string, n int64) store.Usage {
		return store.Usage{Day: day(d), Kind: "tool", Name: name, Calls: n}
	}
	for _, tt := range []struct {
		name     string
		from, to time.Time
		want     []store.Usage
	}{
		{"all days, by day then name", day(-1), day(2), []store.Usage{u(-1, "b", 2), u(0, "a", 1), u(0, "b", 1), u(1, "a", 1), u(1, "b", 1), u(2, "a", 1)}},
		{"bounds are whole days", day(0).Add(23 * time.Hour), day(1).Add(time.Hour), []store.Usage{u(0, "a", 1), u(0, "b", 1), u(1, "a", 1), u(1, "b", 1)}},
		{"one day", day(0).Add(12 * time.Hour), day(0).Add(12 * time.Hour), []store.Usage{u(0, "a", 1), u(0, "b", 1)}},
		{"bounds in another zone", time.Date(2026, 3, 15, 22, 0, 0, 0, time.FixedZone("UTC-3", -3*3600)), day(1).Add(time.Hour), []store.Usage{u(1, "a", 1), u(1, "b", 1)}},
		{"from after to", day(2), day(-1), nil},
		{"no calls those days", day(10), day(20), nil},
	} {
		got, err := s.Usage(t.Context(), p.ID, tt.from, tt.to)
		if err != nil {
			t.Fatalf("%s: Usage: %v", tt.name, err)
		}
		if diff := gocmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Usage(%v, %v) mismatch (-want +got):\n%s", tt.name, tt.from, tt.to, diff)
		}
	}
}

func testPruneCalls(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	var calls []store.Call
	for i := range 5 {
		calls = append(calls, store.Call{Time: at.Add(time.Duration(i) * time.Hour), ProjectID: p.ID, Kind: "tool", Name: "t", Outcome: store.OutcomeOK, Billable: true})
	}
	mustAppend(t, s, calls...)
	usageBefore, err := s.Usage(ctx, p.ID, at, at.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		before time.Time
		want   int64
		left   int
	}{
		{"nothing older", at, 0, 5},
		{"before is exclusive", calls[2].Time, 2, 3},
		{"again", calls[2].Time, 0, 3},
		{"everything", at.Add(24 * time.Hour), 3, 0},
	} {
		n, err := s.PruneCalls(ctx, tt.before)
		if err != nil {
			t.Fatalf("%s: PruneCalls: %v", tt.name, err)
		}
		if n != tt.want {
			t.Errorf("%s: PruneCalls = %d, want %d", tt.name, n, tt.want)
		}
		got, err := s.Calls(ctx, store.CallFilter{ProjectID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.left {
			t.Errorf("%s: %d records left, want %d", tt.name, len(got), tt.left)
		}
		if len(got) > 0 && got[len(got)-1].Time.Before(tt.before) {
			t.Errorf("%s: a record of %v survived pruning before %v", tt.name, got[len(got)-1].Time, tt.before)
		}
	}
	usageAfter, err := s.Usage(ctx, p.ID, at, at.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(usageBefore, usageAfter); diff != "" {
		t.Errorf("usage changed by PruneCalls (-before +after):\n%s", diff)
	}
}

// testAppendCallsBatchOnce: a batch written again under its id (the call
// log retrying a write whose outcome it could not know) is stored once,
// records and usage; another id, or none, is written as usual.
func testAppendCallsBatchOnce(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	calls := make([]store.Call, 3)
	for i := range calls {
		calls[i] = store.Call{Time: at.Add(time.Duration(i) * time.Second), ProjectID: p.ID, Kind: "tool", Name: "t", Outcome: store.OutcomeOK, Billable: true}
	}
	for i, ctx := range []context.Context{
		store.WithCallBatch(t.Context(), "gw1-1"),
		store.WithCallBatch(t.Context(), "gw1-1"), // the retry: nothing more
		store.WithCallBatch(t.Context(), "gw2-1"), // another batch: written
		t.Context(), // no id: written
	} {
		if err := s.AppendCalls(ctx, calls); err != nil {
			t.Fatalf("AppendCalls %d: %v", i+1, err)
		}
	}
	got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 9 {
		t.Errorf("%d records after writing one batch twice and two others, want 9", len(got))
	}
	us, err := s.Usage(t.Context(), p.ID, at, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 || us[0].Calls != 9 {
		t.Errorf("usage %+v, want 9 calls", us)
	}
	// Pruning keeps the ids of batches written within a day.
	if _, err := s.PruneCalls(t.Context(), at); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendCalls(store.WithCallBatch(t.Context(), "gw1-1"), calls); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID}); len(got) != 9 {
		t.Errorf("%d records after a retry following a prune, want 9", len(got))
	}
}

func testConcurrentAppendCalls(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	const writers, batches, size = 8, 20, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				calls := make([]store.Call, size)
				for i := range calls {
					calls[i] = store.Call{
						Time: at.Add(time.Duration(w*batches*size+b*size+i) * time.Millisecond), ProjectID: p.ID,
						Kind: "tool", Name: "search_orders", Outcome: store.OutcomeOK, Billable: true,
					}
				}
				if err := s.AppendCalls(t.Context(), calls); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent AppendCalls: %v", err)
	}
	const total = writers * batches * size
	got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID, Limit: 2 * total})
	if err != nil {
		t.Fatal(err)
	}
	ids := make(map[int64]bool)
	for _, c := range got {
		ids[c.ID] = true
	}
	if len(got) != total || len(ids) != total {
		t.Errorf("after concurrent AppendCalls: %d records with %d distinct ids, want %d", len(got), len(ids), total)
	}
	usage, err := s.Usage(t.Context(), p.ID, at, at)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Usage{{Day: time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC), Kind: "tool", Name: "search_orders", Calls: total}}
	if diff := gocmp.Diff(want, usage); diff != "" {
		t.Errorf("usage after concurrent AppendCalls mismatch (-want +got):\n%s", diff)
	}
}

// testAppendManyCalls: one batch larger than a store writes in one
// statement keeps every record, its fields, the batch's order (ids grow
// with it) and the usage count.
func testAppendManyCalls(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	const n = 150
	calls := make([]store.Call, n)
	billable := 0
	for i := range calls {
		calls[i] = store.Call{
			Time: at.Add(time.Duration(i) * time.Millisecond), ProjectID: p.ID, Kind: "tool", Name: fmt.Sprintf("tool_%d", i%3),
			KeyID: "key_c", Agent: "key_a", Replica: fmt.Sprintf("rep_%d", i), Duration: time.Duration(i) * time.Microsecond,
			Outcome: store.OutcomeError, Error: fmt.Sprintf("error %d", i), Progress: []string{fmt.Sprintf("line %d", i)}, Billable: i%2 == 0,
		}
		if calls[i].Billable {
			billable++
		}
	}
	mustAppend(t, s, calls...)
	got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID, Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d records after appending %d", len(got), n)
	}
	slices.SortFunc(got, func(a, b store.Call) int { return cmp.Compare(a.ID, b.ID) })
	for i, c := range got {
		want := calls[i]
		want.ID, want.Time = c.ID, c.Time
		if diff := gocmp.Diff(want, c); diff != "" || !c.Time.Equal(calls[i].Time) {
			t.Fatalf("record %d (by id) mismatch (-want +got):\n%s time %v want %v", i, diff, c.Time, calls[i].Time)
		}
	}
	usage, err := s.Usage(t.Context(), p.ID, at, at)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, u := range usage {
		total += u.Calls
	}
	if total != int64(billable) {
		t.Errorf("usage counts %d calls; want %d", total, billable)
	}
}

func testCloseTwice(t *testing.T, s store.Store) {
	mustProject(t, s, "orders")
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testCheck: a fresh store takes writes; a closed one says it does not.
func testCheck(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 3 { // the probe may run any number of times
		if err := s.Check(ctx); err != nil {
			t.Fatalf("Check %d on an open store: %v", i+1, err)
		}
	}
	mustProject(t, s, "orders")
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check after a write: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil {
		t.Error("Check on a closed store: got nil, want an error")
	}
}

func testMeta(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.Meta(ctx, store.MetaServeURL)
	wantErr(t, "Meta before SetMeta", err, store.ErrNotFound)
	for _, v := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:9090"} {
		if err := s.SetMeta(ctx, store.MetaServeURL, v); err != nil {
			t.Fatalf("SetMeta(%q): %v", v, err)
		}
		if got, err := s.Meta(ctx, store.MetaServeURL); got != v || err != nil {
			t.Errorf("Meta after SetMeta(%q) = %q, %v", v, got, err)
		}
	}
}

// testSwapMeta: of two writers that saw the same value, one wins.
func testSwapMeta(t *testing.T, s store.Store) {
	ctx := t.Context()
	const name = "swap_test"
	steps := []struct {
		old, value string
		want       bool
		stored     string
	}{
		{"", "a", true, "a"},   // none stored: created
		{"", "b", false, "a"},  // created by someone else meanwhile
		{"a", "c", true, "c"},  // still a: replaced
		{"a", "d", false, "c"}, // no longer a
	}
	for _, st := range steps {
		ok, err := s.SwapMeta(ctx, name, st.old, st.value)
		if ok != st.want || err != nil {
			t.Errorf("SwapMeta(%q, %q) = %v, %v; want %v", st.old, st.value, ok, err, st.want)
		}
		if got, err := s.Meta(ctx, name); got != st.stored || err != nil {
			t.Errorf("Meta after SwapMeta(%q, %q) = %q, %v; want %q", st.old, st.value, got, err, st.stored)
		}
	}
}

func testGateways(t *testing.T, s store.Store) {
	ctx := t.Context()
	clk := startClock()
	if gws, err := s.Gateways(ctx, time.Time{}); err != nil || len(gws) != 0 {
		t.Fatalf("Gateways of a new store = %v, %v; want none", gws, err)
	}
	started := clk.before.Add(-time.Minute).UTC()
	a := store.Gateway{ID: "gw-a", Host: "h1", PID: 10, Addr: "127.0.0.1:8080", StartedAt: started.Add(time.Second)}
	b := store.Gateway{ID: "gw-b", Host: "h2", PID: 20, Addr: "10.0.0.2:8080", Bus: true, StartedAt: started}
	for _, gw := range []store.Gateway{a, b} {
		if err := s.RecordGateway(ctx, gw); err != nil {
			t.Fatal(err)
		}
	}
	gws, err := s.Gateways(ctx, clk.before)
	if err != nil {
		t.Fatal(err)
	}
	if len(gws) != 2 || gws[0].ID != "gw-b" || gws[1].ID != "gw-a" || !gws[0].Bus || gws[1].Bus {
		t.Fatalf("Gateways = %+v, want gw-b then gw-a (oldest start first)", gws)
	}
	got := gws[1]
	clk.check(t, "SeenAt", got.SeenAt)
	checkUTC(t, "StartedAt", got.StartedAt)
	got.SeenAt = time.Time{}
	if diff := gocmp.Diff(a, got); diff != "" {
		t.Errorf("gateway read back (-recorded +read):\n%s", diff)
	}
	// A second record is a heartbeat: one row, seen later.
	a.Addr = "127.0.0.1:9090"
	if err := s.RecordGateway(ctx, a); err != nil {
		t.Fatal(err)
	}
	if gws, _ := s.Gateways(ctx, time.Time{}); len(gws) != 2 || gws[1].Addr != "127.0.0.1:9090" {
		t.Errorf("after a heartbeat: %+v", gws)
	}
	if gws, _ := s.Gateways(ctx, time.Now().Add(time.Hour)); len(gws) != 0 {
		t.Errorf("gateways seen in the future: %+v", gws)
	}
	for _, id := range []string{"gw-b", "gw-b", "gw-nope"} {
		if err := s.RemoveGateway(ctx, id); err != nil {
			t.Errorf("RemoveGateway(%s) = %v", id, err)
		}
	}
	if gws, _ := s.Gateways(ctx, time.Time{}); len(gws) != 1 || gws[0].ID != "gw-a" {
		t.Errorf("after removing gw-b: %+v", gws)
	}
}
