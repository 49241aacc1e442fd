package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

const selectMember = `SELECT m.project_id, m.user_id, u.email, m.role, m.created_at FROM members m JOIN users u ON u.id = m.user_id`

// SetMember implements [store.Store].
func (s *Store) SetMember(ctx context.Context, m store.Member) (store.Member, error) {
	if !m.Role.Valid() {
		return store.Member{}, fmt.Errorf("set member: invalid role %q", m.Role)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE id = $1) + (SELECT COUNT(*) FROM projects WHERE id = $2)`,
			m.UserID, m.ProjectID).Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return store.ErrNotFound
		}
		if _, err := tx.Exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`, m.ProjectID, m.UserID, string(m.Role), millis(now())); err != nil {
			return err
		}
		var err error
		m, err = scanMember(tx.QueryRow(ctx, selectMember+` WHERE m.project_id = $1 AND m.user_id = $2`, m.ProjectID, m.UserID))
		return err
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("set member %d of project %d: %w", m.UserID, m.ProjectID, err)
	}
	return m, nil
}

// RemoveMember implements [store.Store].
func (s *Store) RemoveMember(ctx context.Context, projectID, userID int64) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := mustAffect(tx.Exec(ctx, `DELETE FROM members WHERE project_id = $1 AND user_id = $2`, projectID, userID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q.DeleteMemberUpstream, projectID, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove member %d of project %d: %w", userID, projectID, err)
	}
	return nil
}

// Member implements [store.Store].
func (s *Store) Member(ctx context.Context, projectID, userID int64) (store.Member, error) {
	m, err := scanMember(s.pool.QueryRow(ctx, selectMember+` WHERE m.project_id = $1 AND m.user_id = $2`, projectID, userID))
	if err != nil {
		return store.Member{}, fmt.Errorf("member %d of project %d: %w", userID, projectID, err)
	}
	return m, nil
}

// Members implements [store.Store].
func (s *Store) Members(ctx context.Context, projectID int64) ([]store.Member, error) {
	out, err := list(ctx, s, scanMember, selectMember+` WHERE m.project_id = $1 ORDER BY m.created_at, m.user_id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("members of project %d: %w", projectID, err)
	}
	return out, nil
}

// Memberships implements [store.Store].
func (s *Store) Memberships(ctx context.Context, userID int64) ([]store.Member, error) {
	out, err := list(ctx, s, scanMember, selectMember+` WHERE m.user_id = $1 ORDER BY m.project_id`, userID)
	if err != nil {
		return nil, fmt.Errorf("memberships of user %d: %w", userID, err)
	}
	return out, nil
}

func scanMember(row pgx.Row) (store.Member, error) {
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

// AppendAudit implements [store.Store].
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	e.At = now()
	err := s.pool.QueryRow(ctx, `INSERT INTO audit (at, project_id, actor, addr, action, target, before, after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`, millis(e.At), e.ProjectID, e.Actor, e.Addr, e.Action, e.Target,
		store.AuditJSON(e.Before), store.AuditJSON(e.After)).Scan(&e.ID)
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return e, nil
}

// Audit implements [store.Store].
func (s *Store) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := store.AuditSQL(f, func(n int) string { return "$" + strconv.Itoa(n) })
	out, err := list(ctx, s, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit log of project %d: %w", f.ProjectID, err)
	}
	return out, nil
}

// PruneAudit implements [store.Store].
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE at < $1`, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return tag.RowsAffected(), nil
}

func scanAudit(row pgx.Row) (store.AuditEntry, error) {
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

// AcceptInvite implements [store.Store]. The use is one statement, as in
// [Store.UseInvite]: of two acceptances of one link on any replicas, the
// second finds the row used once the first commits.
func (s *Store) AcceptInvite(ctx context.Context, hash []byte, userID int64) (store.Invite, store.Member, error) {
	var (
		inv store.Invite
		m   store.Member
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		t := millis(now())
		var err error
		inv, err = sqlshared.ScanInvite(tx.QueryRow(ctx, `UPDATE invites SET used_at = $1
WHERE hash = $2 AND used_at IS NULL AND expires_at > $1 AND project_id <> 0
RETURNING `+sqlshared.InviteColumns, t, hash))
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE id = $1) + (SELECT COUNT(*) FROM projects WHERE id = $2)`,
			userID, inv.ProjectID).Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return store.ErrNotFound // rolls the use back
		}
		if _, err := tx.Exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (project_id, user_id) DO NOTHING`, inv.ProjectID, userID, string(inv.Role), t); err != nil {
			return err
		}
		m, err = scanMember(tx.QueryRow(ctx, selectMember+` WHERE m.project_id = $1 AND m.user_id = $2`, inv.ProjectID, userID))
		return err
	})
	if err != nil {
		return store.Invite{}, store.Member{}, fmt.Errorf("accept invite for user %d: %w", userID, err)
	}
	return inv, m, nil
}
