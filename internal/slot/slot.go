// Package slot computes Redis Cluster hash slots and the fixed short tags that
// dlock uses to place a fencing counter in the same slot as a lock.
package slot

import (
	"strconv"
	"strings"
	"sync"
)

// Count is the number of hash slots in a Redis Cluster.
const Count = 16384

// Of returns the hash slot of key: CRC16 (XMODEM) of the key's hash tag, or of
// the whole key when it has none, modulo 16384. A hash tag is the text between
// the first '{' and the next '}', used only when it is not empty.
func Of(key string) uint16 {
	return crc16(HashPart(key)) & (Count - 1)
}

// HashPart returns the part of key that Redis Cluster hashes: its hash tag
// when it has a non-empty one, else the whole key.
func HashPart(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 { // no closing brace, or an empty tag "{}"
		return key
	}
	return key[open+1 : open+1+end]
}

var (
	tagsOnce sync.Once
	tags     [Count]string
)

// Tag returns a short fixed string whose own slot is s, so that "{"+Tag(s)+"}"
// inside a key places that key in slot s. The table is deterministic (for each
// slot, the first base-36 numeral 0, 1, 2, ... that hashes to it) and is part
// of dlock's storage format: changing it would split fencing counters.
func Tag(s uint16) string {
	tagsOnce.Do(buildTags)
	return tags[s&(Count-1)]
}

func buildTags() {
	left := Count
	for n := uint64(0); left > 0; n++ {
		t := strconv.FormatUint(n, 36)
		s := crc16(t) & (Count - 1)
		if tags[s] == "" {
			tags[s] = t
			left--
		}
	}
}
