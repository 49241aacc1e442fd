// Package testenv gives tests what lives outside the Go toolchain: a
// PostgreSQL database, and the rule for when such a thing is missing.
//
// A test whose tools are missing skips with a message that says what to
// install, unless SPACEFIX_REQUIRE_ALL=1 (as in CI), where nothing may
// skip and the message fails the test instead.
package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Unavailable skips t with msg, or fails it under SPACEFIX_REQUIRE_ALL=1.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("SPACEFIX_REQUIRE_ALL") == "1" {
		t.Fatal(msg + " (SPACEFIX_REQUIRE_ALL=1: nothing may skip)")
	}
	t.Skip(msg)
}

// DatabaseURLVar names the variable that points the tests at a PostgreSQL
// database they may create schemas in.
const DatabaseURLVar = "SPACEFIX_TEST_DATABASE_URL"

// Postgres returns the URL of a new, empty schema in the test database,
// dropped when t ends, or skips (see [Unavailable]) when
// SPACEFIX_TEST_DATABASE_URL is not set. Every call gets its own schema,
// so tests in parallel never see each other's rows.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(DatabaseURLVar)
	if base == "" {
		Unavailable(t, DatabaseURLVar+" is not set; point it at a PostgreSQL database to run the PostgreSQL tests, e.g. postgres://spacefix:spacefix@127.0.0.1:5432/spacefix")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", DatabaseURLVar, err)
	}
	defer conn.Close(ctx)
	schema := "t_" + rand.Text()[:16]
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s does not parse: %v", DatabaseURLVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return fmt.Sprint(u)
}

// NATS runs a NATS server in the test process on a loopback port (port 0:
// any free one) until t ends, and returns it; its ClientURL is what
// --bus takes. Nothing to install: the server is the nats-server module.
func NATS(t testing.TB, port int) *natsserver.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start within 10s")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}
