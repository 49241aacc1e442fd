package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

// SetMember implements [store.Store].
func (s *Store) SetMember(ctx context.Context, m store.Member) (store.Member, error) {
	if !m.Role.Valid() {
		return store.Member{}, fmt.Errorf("set member: invalid role %q", m.Role)
	}
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := s.userAndProject(ctx, tx, m.UserID, m.ProjectID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q.SetMember, m.ProjectID, m.UserID, string(m.Role), millis(now())); err != nil {
			return err
		}
		var err error
		m, err = scanMember(tx.QueryRow(ctx, s.q.Member, m.ProjectID, m.UserID))
		return err
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("set member %d of project %d: %w", m.UserID, m.ProjectID, err)
	}
	return m, nil
}

// userAndProject returns [store.ErrNotFound] unless both exist.
func (s *Store) userAndProject(ctx context.Context, tx Querier, userID, projectID int64) error {
	var n int
	if err := tx.QueryRow(ctx, s.q.UserAndProject, userID, projectID).Scan(&n); err != nil {
		return err
	}
	if n != 2 {
		return store.ErrNotFound
	}
	return nil
}

// RemoveMember implements [store.Store]. The person's upstream accounts
// for the project's agents go with the membership.
func (s *Store) RemoveMember(ctx context.Context, projectID, userID int64) error {
	err := s.db.Tx(ctx, func(tx Querier) error {
		if err := mustAffect(tx.Exec(ctx, s.q.RemoveMember, projectID, userID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.DeleteMemberUpstream, projectID, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove member %d of project %d: %w", userID, projectID, err)
	}
	return nil
}

// Member implements [store.Store].
func (s *Store) Member(ctx context.Context, projectID, userID int64) (store.Member, error) {
	m, err := scanMember(s.db.QueryRow(ctx, s.q.Member, projectID, userID))
	if err != nil {
		return store.Member{}, fmt.Errorf("member %d of project %d: %w", userID, projectID, err)
	}
	return m, nil
}

// Members implements [store.Store].
func (s *Store) Members(ctx context.Context, projectID int64) ([]store.Member, error) {
	out, err := list(ctx, s.db, scanMember, s.q.Members, projectID)
	if err != nil {
		return nil, fmt.Errorf("members of project %d: %w", projectID, err)
	}
	return out, nil
}

// Memberships implements [store.Store].
func (s *Store) Memberships(ctx context.Context, userID int64) ([]store.Member, error) {
	out, err := list(ctx, s.db, scanMember, s.q.Memberships, userID)
	if err != nil {
		return nil, fmt.Errorf("memberships of user %d: %w", userID, err)
	}
	return out, nil
}

func scanMember(row Row) (store.Member, error) {
	var (
		m       store.Member
		created int64
	)
	if err := row.Scan(&m.ProjectID, &m.UserID, &m.Email, (*string)(&m.Role), &created); err != nil {
		return store.Member{}, notFound(err)
	}
	m.CreatedAt = fromMillis(created)
	return m, nil
}

// AcceptInvite implements [store.Store]. The use is one statement, as in
// [Store.UseInvite]: of two acceptances of one link on any replicas, the
// second finds the row used once the first commits.
func (s *Store) AcceptInvite(ctx context.Context, hash []byte, userID int64) (store.Invite, store.Member, error) {
	var (
		inv store.Invite
		m   store.Member
	)
	err := s.db.Tx(ctx, func(tx Querier) error {
		t := millis(now())
		var err error
		if inv, err = sqlshared.ScanInvite(tx.QueryRow(ctx, s.q.UseProjectInvite, t, hash, t)); err != nil {
			return err
		}
		if err := s.userAndProject(ctx, tx, userID, inv.ProjectID); err != nil {
			return err // rolls the use back
		}
		if _, err := tx.Exec(ctx, s.q.AddMember, inv.ProjectID, userID, string(inv.Role), t); err != nil {
			return err
		}
		m, err = scanMember(tx.QueryRow(ctx, s.q.Member, inv.ProjectID, userID))
		return err
	})
	if err != nil {
		return store.Invite{}, store.Member{}, fmt.Errorf("accept invite for user %d: %w", userID, err)
	}
	return inv, m, nil
}

// AppendAudit implements [store.Store].
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	e.At = now()
	err := s.db.ExecRow(ctx, s.q.AppendAudit, millis(e.At), e.ProjectID, e.Actor, e.Addr, e.Action, e.Target,
		store.AuditJSON(e.Before), store.AuditJSON(e.After)).Scan(&e.ID)
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return e, nil
}

// Audit implements [store.Store].
func (s *Store) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := store.AuditSQL(f, s.d.Param)
	out, err := list(ctx, s.db, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit log of project %d: %w", f.ProjectID, err)
	}
	return out, nil
}

// PruneAudit implements [store.Store].
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, s.q.PruneAudit, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}

func scanAudit(row Row) (store.AuditEntry, error) {
	var (
		e             store.AuditEntry
		at            int64
		before, after string
	)
	if err := row.Scan(&e.ID, &at, &e.ProjectID, &e.Actor, &e.Addr, &e.Action, &e.Target, &before, &after); err != nil {
		return store.AuditEntry{}, err
	}
	e.At, e.Before, e.After = fromMillis(at), json.RawMessage(before), json.RawMessage(after)
	return e, nil
}
