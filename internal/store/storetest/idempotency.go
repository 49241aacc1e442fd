package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/spacefix/spacefix/internal/store"
)

// newRequest is a running record of request id of create_order in project
// p, claimed at by call, with a one-minute wait and a one-hour window.
func newRequest(p int64, id, call string, at time.Time) store.Request {
	return store.Request{
		ProjectID: p, Tool: "create_order", IDHash: store.HashRequestID(id), ArgsHash: store.HashRequestID(`{"item":"a"}`),
		State: store.RequestRunning, CallID: call, CreatedAt: at, UpdatedAt: at,
		Deadline: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour),
	}
}

// testRequestClaim: the first claim of an id stores it and a second finds
// it standing; another tool, project or id is another record; a finished
// record comes back whole, and only the running call finishes it.
func testRequestClaim(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	r := newRequest(1, "r-81", "c-1", at)
	if _, ok, err := s.ClaimRequest(ctx, r); err != nil || !ok {
		t.Fatalf("first ClaimRequest = %v, %v; want claimed", ok, err)
	}
	again := newRequest(1, "r-81", "c-2", at.Add(time.Second))
	stood, ok, err := s.ClaimRequest(ctx, again)
	if err != nil || ok {
		t.Fatalf("second ClaimRequest = %v, %v; want the first standing", ok, err)
	}
	if diff := gocmp.Diff(r, stood); diff != "" {
		t.Errorf("the record that stood (-want +got):\n%s", diff)
	}
	for _, other := range []store.Request{newRequest(2, "r-81", "c-3", at), newRequest(1, "r-82", "c-4", at)} {
		if _, ok, err := s.ClaimRequest(ctx, other); err != nil || !ok {
			t.Errorf("ClaimRequest of another project or id = %v, %v; want claimed", ok, err)
		}
	}
	other := newRequest(1, "r-81", "c-5", at)
	other.Tool = "cancel_order"
	if _, ok, err := s.ClaimRequest(ctx, other); err != nil || !ok {
		t.Errorf("ClaimRequest of another tool = %v, %v; want claimed", ok, err)
	}

	done := r
	done.CallID = "c-other"
	done.State, done.Result, done.Outcome, done.UpdatedAt = store.RequestDone, json.RawMessage(`{"content":[{"type":"text","text":"order 7 ✓"}]}`), store.OutcomeOK, at.Add(2*time.Second)
	if ok, err := s.FinishRequest(ctx, done); err != nil || ok {
		t.Errorf("FinishRequest by another call = %v, %v; want not applied", ok, err)
	}
	done.CallID = "c-1"
	done.ExpiresAt = at.Add(3 * time.Hour)
	if ok, err := s.FinishRequest(ctx, done); err != nil || !ok {
		t.Fatalf("FinishRequest = %v, %v; want applied", ok, err)
	}
	if ok, err := s.FinishRequest(ctx, done); err != nil || ok {
		t.Errorf("second FinishRequest = %v, %v; want not applied", ok, err)
	}
	got, err := s.Request(ctx, 1, "create_order", store.HashRequestID("r-81"))
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if diff := gocmp.Diff(done, got); diff != "" {
		t.Errorf("finished record (-want +got):\n%s", diff)
	}
	if _, err := s.Request(ctx, 1, "create_order", store.HashRequestID("r-99")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Request of an unknown id = %v, want ErrNotFound", err)
	}

	// A call that never reached an agent lets go of its id.
	rel := newRequest(1, "r-83", "c-6", at)
	if _, ok, err := s.ClaimRequest(ctx, rel); err != nil || !ok {
		t.Fatalf("ClaimRequest r-83 = %v, %v", ok, err)
	}
	if err := s.ReleaseRequest(ctx, rel); err != nil {
		t.Fatalf("ReleaseRequest: %v", err)
	}
	if _, ok, err := s.ClaimRequest(ctx, newRequest(1, "r-83", "c-7", at)); err != nil || !ok {
		t.Errorf("ClaimRequest after ReleaseRequest = %v, %v; want claimed", ok, err)
	}
	if err := s.ReleaseRequest(ctx, done); err != nil {
		t.Fatalf("ReleaseRequest of a done record: %v", err)
	}
	if _, err := s.Request(ctx, 1, "create_order", store.HashRequestID("r-81")); err != nil {
		t.Errorf("ReleaseRequest deleted a done record: %v", err)
	}
}

// testRequestClaimRace: of many claims of one id at once, from as many
// goroutines (and connections), exactly one wins.
func testRequestClaimRace(t *testing.T, s store.Store) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	var (
		wg  sync.WaitGroup
		won atomic.Int32
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.ClaimRequest(context.Background(), newRequest(1, "r-race", fmt.Sprintf("c-%d", i), at))
			if err != nil {
				t.Errorf("ClaimRequest: %v", err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Errorf("%d claims won, want exactly 1", n)
	}
}

// testRequestReclaim: a retry takes over an unknown outcome, or a running
// record past its deadline, under the call id it read; once only.
func testRequestReclaim(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	r := newRequest(1, "r-1", "c-1", at)
	if _, ok, err := s.ClaimRequest(ctx, r); err != nil || !ok {
		t.Fatalf("ClaimRequest = %v, %v", ok, err)
	}
	retry := newRequest(1, "r-1", "c-2", at.Add(time.Second))
	if ok, err := s.ReclaimRequest(ctx, retry, "c-1"); err != nil || ok {
		t.Errorf("ReclaimRequest of a running record within its wait = %v, %v; want not applied", ok, err)
	}
	unknown := r
	unknown.State, unknown.Reason, unknown.UpdatedAt = store.RequestUnknown, "timeout", at.Add(time.Minute)
	if ok, err := s.FinishRequest(ctx, unknown); err != nil || !ok {
		t.Fatalf("FinishRequest unknown = %v, %v", ok, err)
	}
	if ok, err := s.ReclaimRequest(ctx, retry, "c-other"); err != nil || ok {
		t.Errorf("ReclaimRequest under another call id = %v, %v; want not applied", ok, err)
	}
	if ok, err := s.ReclaimRequest(ctx, retry, "c-1"); err != nil || !ok {
		t.Fatalf("ReclaimRequest = %v, %v; want applied", ok, err)
	}
	if ok, err := s.ReclaimRequest(ctx, newRequest(1, "r-1", "c-3", at.Add(time.Second)), "c-1"); err != nil || ok {
		t.Errorf("second ReclaimRequest = %v, %v; want not applied", ok, err)
	}
	got, err := s.Request(ctx, 1, "create_order", store.HashRequestID("r-1"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(retry, got); diff != "" {
		t.Errorf("reclaimed record (-want +got):\n%s", diff)
	}

	// A running record whose gateway went away: stale after its deadline.
	stale := newRequest(1, "r-2", "c-10", at.Add(-time.Hour))
	if _, ok, err := s.ClaimRequest(ctx, stale); err != nil || !ok {
		t.Fatalf("ClaimRequest = %v, %v", ok, err)
	}
	if !stale.Stale(at) || newRequest(1, "r-2", "c-10", at).Stale(at) {
		t.Errorf("Stale: a record an hour old with a one-minute wait should be stale, a new one not")
	}
	if ok, err := s.ReclaimRequest(ctx, newRequest(1, "r-2", "c-11", at), "c-10"); err != nil || !ok {
		t.Errorf("ReclaimRequest of a stale running record = %v, %v; want applied", ok, err)
	}
}

// testRequestExpiry: an expired record is claimed afresh even before it
// is pruned; pruning deletes the expired ones only.
func testRequestExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	old := newRequest(1, "r-old", "c-1", at.Add(-3*time.Hour))
	old.State = store.RequestDone
	if _, ok, err := s.ClaimRequest(ctx, old); err != nil || !ok {
		t.Fatal(ok, err)
	}
	fresh := newRequest(1, "r-old", "c-2", at)
	if _, ok, err := s.ClaimRequest(ctx, fresh); err != nil || !ok {
		t.Errorf("ClaimRequest over an expired record = %v, %v; want claimed", ok, err)
	}
	for i, id := range []string{"r-a", "r-b", "r-c"} {
		r := newRequest(1, id, "c-x", at.Add(-time.Duration(i)*time.Hour-time.Minute))
		if _, ok, err := s.ClaimRequest(ctx, r); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	// r-b expired a minute ago and r-c an hour and a minute ago; r-a and
	// the fresh r-old expire later.
	n, err := s.PruneRequests(ctx, at)
	if err != nil || n != 2 {
		t.Errorf("PruneRequests = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]bool{"r-old": true, "r-a": true, "r-b": false, "r-c": false} {
		_, err := s.Request(ctx, 1, "create_order", store.HashRequestID(id))
		if kept := err == nil; kept != want {
			t.Errorf("%s kept = %v (%v), want %v", id, kept, err, want)
		}
	}
}

// testRequestCallLog: a replay is logged unbilled and counts in no usage;
// the call id and RetryOf come back.
func testRequestCallLog(t *testing.T, s store.Store) {
	p := mustProject(t, s, "orders")
	at := time.Now().UTC().Truncate(time.Millisecond)
	mustAppend(t, s,
		store.Call{Time: at, ProjectID: p.ID, Kind: "tool", Name: "create_order", KeyID: "key_c", Agent: "key_a", Outcome: store.OutcomeOK, Billable: true, CallID: "c-1"},
		store.Call{Time: at.Add(time.Millisecond), ProjectID: p.ID, Kind: "tool", Name: "create_order", KeyID: "key_c", Agent: "key_a", Outcome: store.OutcomeOK, CallID: "c-2", Replay: true},
		store.Call{Time: at.Add(2 * time.Millisecond), ProjectID: p.ID, Kind: "tool", Name: "create_order", KeyID: "key_c", Agent: "key_a", Outcome: store.OutcomeOK, Billable: true, CallID: "c-3", RetryOf: "c-0"},
	)
	got, err := s.Calls(t.Context(), store.CallFilter{ProjectID: p.ID})
	if err != nil || len(got) != 3 {
		t.Fatalf("Calls = %d records, %v; want 3", len(got), err)
	}
	if got[0].RetryOf != "c-0" || got[0].Replay || !got[1].Replay || got[1].Billable || got[1].CallID != "c-2" || got[2].Replay {
		t.Errorf("records = %+v", got)
	}
	u, err := s.Usage(t.Context(), p.ID, at.Add(-48*time.Hour), at.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, x := range u {
		n += x.Calls
	}
	if n != 2 {
		t.Errorf("usage counts %d calls, want 2 (the replay is not billed)", n)
	}
}
