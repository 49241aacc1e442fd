package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spacefix/spacefix/internal/store"
)

func testCallAfterID(t *testing.T, s store.Store) {
	ctx := t.Context()
	start := time.Now().Truncate(time.Millisecond)
	for i := range 5 {
		mustAppend(t, s, store.Call{Time: start.Add(-time.Duration(i) * time.Second), ProjectID: 1, Kind: "tool", Name: "t", Outcome: store.OutcomeOK})
	}
	all, err := s.Calls(ctx, store.CallFilter{ProjectID: 1})
	if err != nil || len(all) != 5 {
		t.Fatalf("Calls = %d, %v; want 5", len(all), err)
	}
	var maxID int64
	for _, c := range all {
		maxID = max(maxID, c.ID)
	}
	mustAppend(t, s, store.Call{Time: start.Add(-time.Hour), ProjectID: 1, Kind: "tool", Name: "late", Outcome: store.OutcomeOK})
	got, err := s.Calls(ctx, store.CallFilter{ProjectID: 1, AfterID: maxID})
	if err != nil || len(got) != 1 || got[0].Name != "late" {
		t.Fatalf("Calls(AfterID %d) = %+v, %v; want only the record written last, though it started earliest", maxID, got, err)
	}
}

func testKeyMeta(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	meta := store.KeyMeta{DisplayName: "Test radar", Author: "Ada", Community: true}
	k := mustKey(t, s, store.Key{ID: "key_a", ProjectID: p.ID, Kind: store.KindAgent, KeyMeta: meta}, "a")
	if k.KeyMeta != meta {
		t.Errorf("CreateKey returned meta %+v, want %+v", k.KeyMeta, meta)
	}
	if got, err := s.Key(ctx, "key_a"); err != nil || got.KeyMeta != meta {
		t.Errorf("Key = %+v, %v; want meta %+v", got.KeyMeta, err, meta)
	}
	other := mustKey(t, s, store.Key{ID: "key_b", ProjectID: p.ID, Kind: store.KindAgent}, "b")
	for _, m := range []store.KeyMeta{{DisplayName: "Orders", Author: "Shop team"}, {}} {
		if err := s.SetKeyMeta(ctx, "key_a", m); err != nil {
			t.Fatalf("SetKeyMeta(%+v): %v", m, err)
		}
		got, err := s.KeyByHash(ctx, hash("a"))
		if err != nil || got.KeyMeta != m {
			t.Errorf("KeyByHash after SetKeyMeta(%+v) = %+v, %v", m, got.KeyMeta, err)
		}
	}
	if got, err := s.Key(ctx, other.ID); err != nil || got.KeyMeta != (store.KeyMeta{}) {
		t.Errorf("untouched key's meta = %+v, %v; want empty", got.KeyMeta, err)
	}
	wantErr(t, "SetKeyMeta(unknown)", s.SetKeyMeta(ctx, "key_unknown", meta), store.ErrNotFound)
}

func testToolSettings(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	other := mustProject(t, s, "billing")
	if got, err := s.ToolSettings(ctx, p.ID); err != nil || len(got) != 0 {
		t.Fatalf("ToolSettings on a new project = %v, %v; want none", got, err)
	}
	in := []store.ToolSettings{
		{ProjectID: p.ID, Tool: "search_orders", CacheSeconds: 30, Access: store.AccessRead},
		{ProjectID: p.ID, Tool: "get_order", Description: "Look up one order. ünïcode \"quoted\"", Disabled: true},
		{ProjectID: other.ID, Tool: "get_order", Access: store.AccessWrite},
	}
	saved := map[string]store.ToolSettings{}
	for _, ts := range in {
		clk := startClock()
		got, err := s.SaveToolSettings(ctx, ts)
		if err != nil {
			t.Fatalf("SaveToolSettings(%+v): %v", ts, err)
		}
		clk.check(t, "UpdatedAt", got.UpdatedAt)
		ts.UpdatedAt = got.UpdatedAt
		if diff := cmp.Diff(ts, got); diff != "" {
			t.Errorf("SaveToolSettings mismatch (-want +got):\n%s", diff)
		}
		if ts.ProjectID == p.ID {
			saved[ts.Tool] = got
		}
	}
	want := []store.ToolSettings{saved["get_order"], saved["search_orders"]} // by name
	got, err := s.ToolSettings(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToolSettings mismatch (-want +got):\n%s", diff)
	}

	// Replacing keeps one row; all defaults removes it.
	upd := store.ToolSettings{ProjectID: p.ID, Tool: "search_orders", CacheSeconds: 3600}
	if _, err := s.SaveToolSettings(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveToolSettings(ctx, store.ToolSettings{ProjectID: p.ID, Tool: "get_order"}); err != nil {
		t.Fatal(err)
	}
	got, err = s.ToolSettings(ctx, p.ID)
	if err != nil || len(got) != 1 || got[0].CacheSeconds != 3600 || got[0].Access != store.AccessFollow {
		t.Errorf("ToolSettings after replace and reset = %+v, %v; want only search_orders with cache 3600", got, err)
	}
	if got, err := s.ToolSettings(ctx, other.ID); err != nil || len(got) != 1 || got[0].Access != store.AccessWrite {
		t.Errorf("other project's settings = %+v, %v; want its own get_order", got, err)
	}
}

func testToolSettingsErrors(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	_, err := s.SaveToolSettings(ctx, store.ToolSettings{ProjectID: p.ID + 1000, Tool: "x", Disabled: true})
	wantErr(t, "SaveToolSettings of a missing project", err, store.ErrNotFound)
	if _, err := s.SaveToolSettings(ctx, store.ToolSettings{ProjectID: p.ID, Disabled: true}); err == nil {
		t.Error("SaveToolSettings without a tool name succeeded, want an error")
	}
	_, err = s.ApproveTool(ctx, p.ID+1000, "x", []byte(`{}`))
	wantErr(t, "ApproveTool in a missing project", err, store.ErrNotFound)
	if _, err := s.ApproveTool(ctx, p.ID, "x", nil); err == nil {
		t.Error("ApproveTool with no definition succeeded, want an error")
	}
}

func testApprovals(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := mustProject(t, s, "orders")
	v1, v2, v3 := []byte(`{"description":"one"}`), []byte(`{"description":"two"}`), []byte(`{"description":"three"}`)
	clk := startClock()
	a, err := s.ApproveTool(ctx, p.ID, "get_order", v1)
	if err != nil {
		t.Fatal(err)
	}
	clk.check(t, "ApprovedAt", a.ApprovedAt)
	want := store.Approval{ProjectID: p.ID, Tool: "get_order", Definition: v1, ApprovedAt: a.ApprovedAt}
	if diff := cmp.Diff(want, a, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ApproveTool mismatch (-want +got):\n%s", diff)
	}

	a, err = s.RejectTool(ctx, p.ID, "get_order", v2)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Definition) != string(v1) || string(a.Rejected) != string(v2) || a.RejectedAt.IsZero() {
		t.Errorf("after RejectTool = %+v; want v1 approved and v2 rejected", a)
	}
	a, err = s.ApproveTool(ctx, p.ID, "get_order", v3)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Definition) != string(v3) || a.Rejected != nil || !a.RejectedAt.IsZero() {
		t.Errorf("after approving v3 = %+v; want v3 approved and no rejection", a)
	}

	// A new tool rejected before any approval has no definition.
	n, err := s.RejectTool(ctx, p.ID, "drop_orders", v1)
	if err != nil {
		t.Fatal(err)
	}
	if n.Definition != nil || !n.ApprovedAt.IsZero() || string(n.Rejected) != string(v1) {
		t.Errorf("RejectTool of a new tool = %+v; want no approved definition", n)
	}
	all, err := s.Approvals(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.Approval{n, a}, all, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Approvals mismatch, want sorted by tool (-want +got):\n%s", diff)
	}
	if other, err := s.Approvals(ctx, p.ID+1000); err != nil || len(other) != 0 {
		t.Errorf("Approvals of another project = %v, %v; want none", other, err)
	}
}
