// Package testserver starts the real servers dlock's tests run against:
// redis-server processes on free loopback ports when the binary is on PATH,
// else a Redis container through testcontainers when a Docker engine answers,
// and a connection to PostgreSQL for the fencing tests.
//
// When neither way to run Redis exists, tests skip with a message naming both;
// with DLOCK_REQUIRE_REDIS=1 (CI) they fail instead. Likewise PostgreSQL with
// DLOCK_REQUIRE_POSTGRES=1.
//
// Every server gets, right after it starts (and again after Restart), an ACL
// user LockUser with the least-privilege rule of README.md's "Least
// privilege (ACL)" (LockRule with LockCommands), the key pattern "*"
// standing for the lock names since the tests use many, and a random
// password, the same on every server of the test process so that a client
// can fail over between them. The user is created through a full-rights
// connection, for containers too. Commands the server does not know
// (renamed away) are left out of its rule.
//
//   - (*Redis).Client connects as LockUser: hand it to dlock, so the suite
//     proves that dlock works with no more rights than the README asks for.
//   - (*Redis).Admin connects as the default user with every right: use it
//     for everything a test does to Redis itself (reading, stealing and
//     deleting keys, FLUSHALL, SCRIPT FLUSH, CLIENT KILL, INFO, CONFIG,
//     PUBSUB, KEYS, TIME, foreign data), which LockUser is refused.
//
// When a server stops (Kill, Restart, the end of the test) the harness reads
// its ACL LOG and fails the test if LockUser was refused anything: dlock
// needed a right the rule lacks (even one whose refusal never reaches the
// caller), or the test used Client where it meant Admin. A test that makes
// Redis refuse LockUser on purpose calls (*Redis).ExpectDenials.
//
// StartRedisTLS starts a server that speaks TLS only, with a CA and a server
// certificate for 127.0.0.1 and localhost generated for the test; Client and
// Admin then connect over TLS, and the returned tls.Config trusts the CA.
package testserver
