package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/sqlshared"
)

const selectMember = `SELECT m.project_id, m.user_id, u.email, m.role, m.created_at FROM members m JOIN users u ON u.id = m.user_id`

// SetMember implements [store.Store].
func (s *Store) SetMember(ctx context.Context, m store.Member) (store.Member, error) {
	if !m.Role.Valid() {
		return store.Member{}, fmt.Errorf("set member: invalid role %q", m.Role)
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE id = ?) + (SELECT COUNT(*) FROM projects WHERE id = ?)`,
			m.UserID, m.ProjectID).Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return store.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`, m.ProjectID, m.UserID, string(m.Role), millis(now())); err != nil {
			return err
		}
		var err error
		m, err = scanMember(tx.QueryRowContext(ctx, selectMember+` WHERE m.project_id = ? AND m.user_id = ?`, m.ProjectID, m.UserID))
		return err
	})
	if err != nil {
		return store.Member{}, fmt.Errorf("set member %d of project %d: %w", m.UserID, m.ProjectID, err)
	}
	return m, nil
}

// RemoveMember implements [store.Store].
func (s *Store) RemoveMember(ctx context.Context, projectID, userID int64) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM members WHERE project_id = ? AND user_id = ?`, projectID, userID)
		if err != nil {
			return err
		}
		if err := mustAffect(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, q.DeleteMemberUpstream, projectID, userID)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove member %d of project %d: %w", userID, projectID, err)
	}
	return nil
}

// Member implements [store.Store].
func (s *Store) Member(ctx context.Context, projectID, userID int64) (store.Member, error) {
	m, err := scanMember(s.r.QueryRowContext(ctx, selectMember+` WHERE m.project_id = ? AND m.user_id = ?`, projectID, userID))
	if err != nil {
		return store.Member{}, fmt.Errorf("member %d of project %d: %w", userID, projectID, err)
	}
	return m, nil
}

// Members implements [store.Store].
func (s *Store) Members(ctx context.Context, projectID int64) ([]store.Member, error) {
	out, err := queryList(ctx, s.r, scanMember, selectMember+` WHERE m.project_id = ? ORDER BY m.created_at, m.user_id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("members of project %d: %w", projectID, err)
	}
	return out, nil
}

// Memberships implements [store.Store].
func (s *Store) Memberships(ctx context.Context, userID int64) ([]store.Member, error) {
	out, err := queryList(ctx, s.r, scanMember, selectMember+` WHERE m.user_id = ? ORDER BY m.project_id`, userID)
	if err != nil {
		return nil, fmt.Errorf("memberships of user %d: %w", userID, err)
	}
	return out, nil
}

func scanMember(sc scanner) (store.Member, error) {
	var (
		m       store.Member
		role    string
		created int64
	)
	err := sc.Scan(&m.ProjectID, &m.UserID, &m.Email, &role, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Member{}, store.ErrNotFound
	}
	if err != nil {
		return store.Member{}, err
	}
	m.Role, m.CreatedAt = store.Role(role), fromMillis(created)
	return m, nil
}

// queryList runs a query and scans every row.
func queryList[T any](ctx context.Context, db *sql.DB, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// AppendAudit implements [store.Store].
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	e.At = now()
	before, after := store.AuditJSON(e.Before), store.AuditJSON(e.After)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO audit (at, project_id, actor, addr, action, target, before, after)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, millis(e.At), e.ProjectID, e.Actor, e.Addr, e.Action, e.Target, before, after).Scan(&e.ID)
	})
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry %s: %w", e.Action, err)
	}
	return e, nil
}

// Audit implements [store.Store].
func (s *Store) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := store.AuditSQL(f, func(int) string { return "?" })
	out, err := queryList(ctx, s.r, scanAudit, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit log of project %d: %w", f.ProjectID, err)
	}
	return out, nil
}

// PruneAudit implements [store.Store].
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.deleteRows(ctx, `DELETE FROM audit WHERE at < ?`, millis(before))
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}

func scanAudit(sc scanner) (store.AuditEntry, error) {
	var (
		e             store.AuditEntry
		at            int64
		before, after string
	)
	if err := sc.Scan(&e.ID, &at, &e.ProjectID, &e.Actor, &e.Addr, &e.Action, &e.Target, &before, &after); err != nil {
		return store.AuditEntry{}, err
	}
	e.At, e.Before, e.After = fromMillis(at), json.RawMessage(before), json.RawMessage(after)
	return e, nil
}

// AcceptInvite implements [store.Store].
func (s *Store) AcceptInvite(ctx context.Context, hash []byte, userID int64) (store.Invite, store.Member, error) {
	var (
		inv store.Invite
		m   store.Member
	)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		t := now()
		var err error
		inv, err = sqlshared.ScanInvite(tx.QueryRowContext(ctx, q.LiveProjectInviteByHash,
			hash, millis(t)))
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM users WHERE id = ?) + (SELECT COUNT(*) FROM projects WHERE id = ?)`,
			userID, inv.ProjectID).Scan(&n); err != nil {
			return err
		}
		if n != 2 {
			return store.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `UPDATE invites SET used_at = ? WHERE hash = ?`, millis(t), hash); err != nil {
			return err
		}
		inv.UsedAt = t
		if _, err := tx.ExecContext(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (project_id, user_id) DO NOTHING`, inv.ProjectID, userID, string(inv.Role), millis(t)); err != nil {
			return err
		}
		m, err = scanMember(tx.QueryRowContext(ctx, selectMember+` WHERE m.project_id = ? AND m.user_id = ?`, inv.ProjectID, userID))
		return err
	})
	if err != nil {
		return store.Invite{}, store.Member{}, fmt.Errorf("accept invite for user %d: %w", userID, err)
	}
	return inv, m, nil
}
