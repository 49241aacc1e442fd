package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spacefix/spacefix/internal/store"
)

// RecordGateway implements [store.Store].
func (s *Store) RecordGateway(ctx context.Context, gw store.Gateway) error {
	_, err := s.db.Exec(ctx, s.q.RecordGateway, gw.ID, gw.Host, gw.PID, gw.Addr, gw.Bus, millis(gw.StartedAt), millis(now()))
	if err != nil {
		return fmt.Errorf("record gateway %s: %w", gw.ID, err)
	}
	return nil
}

// Gateways implements [store.Store].
func (s *Store) Gateways(ctx context.Context, since time.Time) ([]store.Gateway, error) {
	out, err := list(ctx, s.db, scanGateway, s.q.Gateways, millis(since))
	if err != nil {
		return nil, fmt.Errorf("list gateways: %w", err)
	}
	return out, nil
}

func scanGateway(row Row) (store.Gateway, error) {
	var (
		gw            store.Gateway
		started, seen int64
	)
	err := row.Scan(&gw.ID, &gw.Host, &gw.PID, &gw.Addr, &gw.Bus, &started, &seen)
	gw.StartedAt, gw.SeenAt = fromMillis(started), fromMillis(seen)
	return gw, err
}

// RemoveGateway implements [store.Store].
func (s *Store) RemoveGateway(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, s.q.RemoveGateway, id); err != nil {
		return fmt.Errorf("remove gateway %s: %w", id, err)
	}
	return nil
}

// SetMeta implements [store.Store].
func (s *Store) SetMeta(ctx context.Context, name, value string) error {
	if _, err := s.db.Exec(ctx, s.q.SetMeta, name, value, millis(now())); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// Meta implements [store.Store].
func (s *Store) Meta(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRow(ctx, s.q.Meta, name).Scan(&v)
	if errors.Is(notFound(err), store.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return v, nil
}

// SwapMeta implements [store.Store].
func (s *Store) SwapMeta(ctx context.Context, name, old, value string) (bool, error) {
	q, args := s.q.SwapMeta, []any{value, millis(now()), name, old}
	if old == "" {
		q, args = s.q.InsertMeta, []any{name, value, millis(now())}
	}
	n, err := s.db.Exec(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("swap %s: %w", name, err)
	}
	return n == 1, nil
}

// CheckWrite is the write of a readiness check: an upsert of one row of
// the meta table, with value, so the probe never grows the store. The
// engines' Check methods word what its failure means.
func (s *Store) CheckWrite(ctx context.Context, value string) error {
	_, err := s.db.Exec(ctx, s.q.CheckMeta, value, millis(now()))
	return err
}
