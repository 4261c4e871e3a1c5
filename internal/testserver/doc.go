// Package testserver starts the real servers dlock's tests run against:
// redis-server processes on free loopback ports when the binary is on PATH,
// else a Redis container through testcontainers when a Docker engine answers,
// and a connection to PostgreSQL for the fencing tests.
//
// When neither way to run Redis exists, tests skip with a message naming both;
// with DLOCK_REQUIRE_REDIS=1 (CI) they fail instead. Likewise PostgreSQL with
// DLOCK_REQUIRE_POSTGRES=1.
package testserver
