package testserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresURL is used when DLOCK_POSTGRES_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test"

// RequirePostgres reports whether a missing PostgreSQL must fail the test.
func RequirePostgres() bool { return os.Getenv("DLOCK_REQUIRE_POSTGRES") == "1" }

// Postgres connects to the test PostgreSQL (DLOCK_POSTGRES_URL, or
// DefaultPostgresURL), closed when the test ends. It skips the test when the
// server does not answer, or fails it under DLOCK_REQUIRE_POSTGRES=1.
func Postgres(tb testing.TB) *pgx.Conn {
	tb.Helper()
	url := os.Getenv("DLOCK_POSTGRES_URL")
	if url == "" {
		url = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		err = conn.Ping(ctx)
	}
	if err != nil {
		if RequirePostgres() {
			tb.Fatalf("DLOCK_REQUIRE_POSTGRES=1: PostgreSQL at %s: %v", url, err)
		}
		tb.Skipf("no PostgreSQL at %s (set DLOCK_POSTGRES_URL): %v", url, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}
