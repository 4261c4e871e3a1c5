// Package demo is the duplicate-delivery story that `dlock demo` and
// examples/fulfillment tell: order 1001 is delivered three times, three
// workers race for lock:order:1001, one ships it, a duplicate waits and then
// skips, and a worker that stalls past its lease loses the lock and has its
// late write rejected by the fencing token.
package demo
