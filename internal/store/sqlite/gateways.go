package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// RecordGateway implements [store.Store].
func (s *Store) RecordGateway(ctx context.Context, gw store.Gateway) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO gateways (id, host, pid, addr, bus, started_at, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, addr = excluded.addr, bus = excluded.bus,
started_at = excluded.started_at, seen_at = excluded.seen_at`,
			gw.ID, gw.Host, gw.PID, gw.Addr, gw.Bus, millis(gw.StartedAt), millis(now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("record gateway %s: %w", gw.ID, err)
	}
	return nil
}

// Gateways implements [store.Store].
func (s *Store) Gateways(ctx context.Context, since time.Time) ([]store.Gateway, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, host, pid, addr, bus, started_at, seen_at FROM gateways
WHERE seen_at >= ? ORDER BY started_at, id`, millis(since))
	if err != nil {
		return nil, fmt.Errorf("list gateways: %w", err)
	}
	defer rows.Close()
	var out []store.Gateway
	for rows.Next() {
		var (
			gw            store.Gateway
			started, seen int64
		)
		if err := rows.Scan(&gw.ID, &gw.Host, &gw.PID, &gw.Addr, &gw.Bus, &started, &seen); err != nil {
			return nil, fmt.Errorf("list gateways: %w", err)
		}
		gw.StartedAt, gw.SeenAt = fromMillis(started), fromMillis(seen)
		out = append(out, gw)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list gateways: %w", err)
	}
	return out, nil
}

// RemoveGateway implements [store.Store].
func (s *Store) RemoveGateway(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM gateways WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove gateway %s: %w", id, err)
	}
	return nil
}
