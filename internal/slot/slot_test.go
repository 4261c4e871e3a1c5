package slot

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Values read with CLUSTER KEYSLOT from a real redis-server 7.0 in cluster mode.
func TestOfKnownValues(t *testing.T) {
	cases := map[string]uint16{
		"123456789":            0x31C3 & (Count - 1), // the CRC16/XMODEM check value
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           Of("foo{}{bar}"),
		"":                     0,
	}
	for k, want := range cases {
		if got := Of(k); got != want {
			t.Errorf("Of(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestHashPart(t *testing.T) {
	cases := map[string]string{
		"plain":         "plain",
		"{tag}rest":     "tag",
		"a{}b":          "a{}b", // empty tag: the whole key is hashed
		"foo{}{bar}":    "foo{}{bar}",
		"foo{{bar}}zap": "{bar",
		"foo{bar}{zap}": "bar",
		"open{only":     "open{only",
		"close}only{":   "close}only{",
		"{}":            "{}",
		"x{y}":          "y",
	}
	for k, want := range cases {
		if got := HashPart(k); got != want {
			t.Errorf("HashPart(%q) = %q, want %q", k, got, want)
		}
	}
}

func TestTagCoversEverySlot(t *testing.T) {
	for s := range uint16(Count) {
		tag := Tag(s)
		if tag == "" {
			t.Fatalf("slot %d has no tag", s)
		}
		if got := Of("dlock:fence:{" + tag + "}"); got != s {
			t.Fatalf("tag %q of slot %d hashes to %d", tag, s, got)
		}
		if len(tag) > 4 {
			t.Fatalf("tag %q of slot %d is longer than 4 characters", tag, s)
		}
	}
}

// The table is part of the storage format: these values must never change.
func TestTagIsStable(t *testing.T) {
	// CLUSTER KEYSLOT 0 = 13907, CLUSTER KEYSLOT 1 = 9842, CLUSTER KEYSLOT zz = 14415.
	golden := map[uint16]string{13907: "0", 9842: "1"}
	for s, want := range golden {
		if got := Tag(s); got != want {
			t.Errorf("Tag(%d) = %q, want %q", s, got, want)
		}
	}
	if got := Of(Tag(14415)); got != 14415 {
		t.Errorf("Tag(14415) = %q hashes to %d", Tag(14415), got)
	}
}
