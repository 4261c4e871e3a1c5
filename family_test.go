package dlock

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOwnerName(t *testing.T) {
	for _, name := range []string{"lock:a", "{x}y", "a}:b", "dlock:readers", ""} {
		assert.Equal(t, name, ownerName(derivedKey("readers", name)), name)
	}
	assert.Equal(t, "plain", ownerName("plain"))
}
