// Package teststores opens the stores a package's tests run on: a SQLite
// file always, and PostgreSQL when testenv.DatabaseURLVar is set.
package teststores

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
	"github.com/spacefix/spacefix/internal/testenv"
)

// Openers returns, by name ("sqlite", "postgres"), a function that opens a
// new, empty store of that kind, closed when its test ends.
func Openers() map[string]func(t testing.TB) store.Store {
	out := map[string]func(t testing.TB) store.Store{
		"sqlite": func(t testing.TB) store.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "spacefix.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(testenv.DatabaseURLVar) != "" {
		out["postgres"] = func(t testing.TB) store.Store {
			s, err := postgres.Open(context.Background(), testenv.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
	return out
}

// SQLite opens a new SQLite store, closed when t ends.
func SQLite(t testing.TB) store.Store { return Openers()["sqlite"](t) }
