// Package integration holds dlock's tests against real servers: redis-server
// processes started by internal/testserver on free loopback ports, and
// PostgreSQL for the fencing tests. Run them with go test ./...; CI sets
// DLOCK_REQUIRE_REDIS=1 and DLOCK_REQUIRE_POSTGRES=1 so that a missing server
// fails instead of skipping.
package integration
