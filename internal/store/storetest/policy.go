package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
)

func testPolicies(t *testing.T, s store.Store) {
	ctx := context.Background()
	p, err := s.CreateProject(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateProject(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}

	got, err := s.Policy(ctx, p.ID)
	if err != nil || got.Version != 0 || len(got.Document) != 0 || got.ProjectID != p.ID {
		t.Fatalf("Policy of a project that saved none = %+v, %v; want version 0 and no document", got, err)
	}

	v1 := json.RawMessage(`{"rules":[{"name":"a","on":"call","effect":"deny"}]}`)
	saved, err := s.SavePolicy(ctx, p.ID, 0, v1, "ann@example.com")
	if err != nil || saved.Version != 1 {
		t.Fatalf("SavePolicy(prev 0) = %+v, %v; want version 1", saved, err)
	}
	if _, err := s.SavePolicy(ctx, p.ID, 0, v1, "bob@example.com"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second save from version 0 = %v, want ErrConflict", err)
	}
	if _, err := s.SavePolicy(ctx, p.ID, 5, v1, "bob@example.com"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a save from a version that was never saved = %v, want ErrConflict", err)
	}
	v2 := json.RawMessage(`{"rules":[]}`)
	if _, err := s.SavePolicy(ctx, p.ID, 1, v2, "bob@example.com"); err != nil {
		t.Fatal(err)
	}

	got, err = s.Policy(ctx, p.ID)
	if err != nil || got.Version != 2 || string(got.Document) != string(v2) || got.UpdatedBy != "bob@example.com" || got.UpdatedAt.IsZero() {
		t.Fatalf("Policy after two saves = %+v, %v; want version 2 by bob", got, err)
	}
	vs, err := s.PolicyVersions(ctx, p.ID, 10)
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || string(vs[1].Document) != string(v1) {
		t.Fatalf("PolicyVersions = %+v, %v; want versions 2 then 1", vs, err)
	}
	if vs, err := s.PolicyVersions(ctx, p.ID, 1); err != nil || len(vs) != 1 {
		t.Fatalf("PolicyVersions(limit 1) = %d versions, %v", len(vs), err)
	}
	if got, err := s.Policy(ctx, other.ID); err != nil || got.Version != 0 {
		t.Fatalf("another project's policy = %+v, %v; want none", got, err)
	}
}
