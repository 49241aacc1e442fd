package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

var _ store.Idempotency = (*Store)(nil)

// ClaimRequest implements [store.Idempotency]: an expired record that was
// not pruned yet is replaced, in the same statement. Of two claims at
// once, the second waits on the first (its row lock on PostgreSQL, the
// write lock on SQLite) and then finds it standing.
func (s *Store) ClaimRequest(ctx context.Context, r store.Request) (store.Request, bool, error) {
	n, err := s.db.Exec(ctx, s.q.ClaimRequest, requestArgs(r)...)
	if err != nil {
		return store.Request{}, false, fmt.Errorf("claim request id of %s: %w", r.Tool, err)
	}
	if n == 1 {
		return r, true, nil
	}
	stood, err := s.Request(ctx, r.ProjectID, r.Tool, r.IDHash)
	if err != nil {
		return store.Request{}, false, fmt.Errorf("claim request id of %s: %w", r.Tool, err)
	}
	return stood, false, nil
}

// Request implements [store.Idempotency].
func (s *Store) Request(ctx context.Context, projectID int64, tool string, idHash []byte) (store.Request, error) {
	var (
		r                                   store.Request
		state                               string
		created, updated, deadline, expires int64
		result                              []byte
	)
	err := s.db.QueryRow(ctx, s.q.Request, projectID, tool, idHash).Scan(
		&r.ProjectID, &r.Tool, &r.IDHash, &r.ArgsHash, &state, &r.CallID, &result, &r.Outcome, &r.Reason,
		&created, &updated, &deadline, &expires)
	if err != nil {
		return store.Request{}, fmt.Errorf("request id of %s: %w", tool, notFound(err))
	}
	r.State, r.Result = store.RequestState(state), rawJSON(result)
	r.CreatedAt, r.UpdatedAt, r.Deadline, r.ExpiresAt = fromMillis(created), fromMillis(updated), fromMillis(deadline), fromMillis(expires)
	return r, nil
}

// ReclaimRequest implements [store.Idempotency]. Of two at once, the
// second waits on the first and then finds another call id.
func (s *Store) ReclaimRequest(ctx context.Context, r store.Request, prevCallID string) (bool, error) {
	n, err := s.db.Exec(ctx, s.q.ReclaimRequest,
		r.ArgsHash, string(r.State), r.CallID, blob(r.Result), r.Outcome, r.Reason,
		millis(r.CreatedAt), millis(r.UpdatedAt), millis(r.Deadline), millis(r.ExpiresAt),
		r.ProjectID, r.Tool, r.IDHash, prevCallID, millis(store.StaleBefore(r.UpdatedAt)))
	if err != nil {
		return false, fmt.Errorf("reclaim request id of %s: %w", r.Tool, err)
	}
	return n == 1, nil
}

// FinishRequest implements [store.Idempotency].
func (s *Store) FinishRequest(ctx context.Context, r store.Request) (bool, error) {
	n, err := s.db.Exec(ctx, s.q.FinishRequest,
		string(r.State), blob(r.Result), r.Outcome, r.Reason, millis(r.UpdatedAt), millis(r.ExpiresAt),
		r.ProjectID, r.Tool, r.IDHash, r.CallID)
	if err != nil {
		return false, fmt.Errorf("finish request id of %s: %w", r.Tool, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements [store.Idempotency].
func (s *Store) ReleaseRequest(ctx context.Context, r store.Request) error {
	if _, err := s.db.Exec(ctx, s.q.ReleaseRequest, r.ProjectID, r.Tool, r.IDHash, r.CallID); err != nil {
		return fmt.Errorf("release request id of %s: %w", r.Tool, err)
	}
	return nil
}

// PruneRequests implements [store.Idempotency].
func (s *Store) PruneRequests(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneRequests, millis(now))
	if err != nil {
		return 0, fmt.Errorf("prune request ids: %w", err)
	}
	return n, nil
}

// requestArgs are r's values in the order of [store.RequestColumns].
func requestArgs(r store.Request) []any {
	return []any{r.ProjectID, store.CleanText(r.Tool), r.IDHash, r.ArgsHash, string(r.State), r.CallID, blob(r.Result),
		r.Outcome, r.Reason, millis(r.CreatedAt), millis(r.UpdatedAt), millis(r.Deadline), millis(r.ExpiresAt)}
}
