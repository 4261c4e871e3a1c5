package dlock

import "github.com/dlock-go/dlock/internal/slot"

// fencePrefix starts the name of every fencing counter.
const fencePrefix = "dlock:fence:"

// fenceKey returns the fencing counter of name's hash slot,
// dlock:fence:{T}, where T is the fixed short tag whose slot is that slot.
// There are at most 16,384 counters, however many names are locked; a
// counter is shared by every name of its slot, so tokens strictly increase
// per name (and per slot) across all clients.
func fenceKey(name string) string {
	return fencePrefix + "{" + slot.Tag(slot.Of(name)) + "}"
}

// slotOf returns the hash slot of a key.
func slotOf(key string) uint16 { return slot.Of(key) }
