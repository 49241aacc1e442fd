package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Versions is how many schema steps this build knows.
var Versions = len(migrations)

// MigrateTo brings a new schema to version n only, as an older build would.
func MigrateTo(ctx context.Context, url string, n int) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	all := migrations
	migrations = all[:n]
	defer func() { migrations = all }()
	return migrate(ctx, pool)
}

// Retried returns how many reads were repeated after a lost connection.
func (s *Store) Retried() int64 { return s.retried.Load() }
