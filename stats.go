package dlock

import "time"

// Stats are a Client's counters since New, for monitoring and benchmarks.
// Read them with Client.Stats.
type Stats struct {
	// Held is the number of holds the watchdog watches now.
	Held int
	// Passes is the number of renewal passes sent: each carries every
	// renewal and background release due at the time.
	Passes uint64
	// Pipelines is the number of pipelines those passes sent: one round trip
	// each (on a cluster, go-redis sends one to each node in parallel); a
	// pass sends a second one only after reloading a flushed script cache.
	Pipelines uint64
	// Renewals is the number of lock renewals Redis confirmed.
	Renewals uint64
	// RenewalErrors is the number of renewals that failed to reach Redis or
	// that Redis refused.
	RenewalErrors uint64
	// Losses is the number of holds that ended as lost.
	Losses uint64
	// LastPass and MaxPass are the wall time of the last and the slowest
	// renewal pass, from sending to applying the answers.
	LastPass, MaxPass time.Duration
	// LastPassSize and MaxPassSize are the number of entries in the last and
	// the largest pass.
	LastPassSize, MaxPassSize int
}

// Stats returns a snapshot of the Client's counters.
func (c *Client) Stats() Stats {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	s := c.w.stats
	s.Pipelines = c.st.pipelines()
	return s
}
