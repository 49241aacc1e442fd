package main

import (
	"context"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
	"github.com/spacefix/spacefix/internal/store/sqlite"
)

// openStore opens the store --data names: a postgres:// (or postgresql://)
// URL, or else a SQLite file. Its errors say which store and never carry a
// password.
func openStore(ctx context.Context, data string) (store.Store, error) {
	if postgres.IsURL(data) {
		return postgres.Open(ctx, data)
	}
	return sqlite.Open(ctx, data)
}

// dataName is --data as people may read it: a URL without its password.
func dataName(data string) string {
	if postgres.IsURL(data) {
		return postgres.Redact(data)
	}
	return data
}
