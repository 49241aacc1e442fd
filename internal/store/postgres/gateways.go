package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spacefix/spacefix/internal/store"
)

// RecordGateway implements [store.Store].
func (s *Store) RecordGateway(ctx context.Context, gw store.Gateway) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO gateways (id, host, pid, addr, bus, started_at, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, addr = excluded.addr, bus = excluded.bus,
started_at = excluded.started_at, seen_at = excluded.seen_at`,
		gw.ID, gw.Host, gw.PID, gw.Addr, gw.Bus, millis(gw.StartedAt), millis(now()))
	if err != nil {
		return fmt.Errorf("record gateway %s: %w", gw.ID, err)
	}
	return nil
}

// Gateways implements [store.Store].
func (s *Store) Gateways(ctx context.Context, since time.Time) ([]store.Gateway, error) {
	out, err := list(ctx, s, func(row pgx.Row) (store.Gateway, error) {
		var (
			gw            store.Gateway
			started, seen int64
		)
		err := row.Scan(&gw.ID, &gw.Host, &gw.PID, &gw.Addr, &gw.Bus, &started, &seen)
		gw.StartedAt, gw.SeenAt = fromMillis(started), fromMillis(seen)
		return gw, err
	}, `SELECT id, host, pid, addr, bus, started_at, seen_at FROM gateways WHERE seen_at >= $1 ORDER BY started_at, id`, millis(since))
	if err != nil {
		return nil, fmt.Errorf("list gateways: %w", err)
	}
	return out, nil
}

// RemoveGateway implements [store.Store].
func (s *Store) RemoveGateway(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM gateways WHERE id = $1`, id); err != nil {
		return fmt.Errorf("remove gateway %s: %w", id, err)
	}
	return nil
}
