package dlock

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every script's includes are expanded, and the scripts that grant share one
// fencing function.
func TestScriptIncludes(t *testing.T) {
	names, err := fs.Glob(scriptFiles, "scripts/*.lua")
	assert.NoError(t, err)
	granting := 0
	for _, p := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "scripts/"), ".lua")
		src := scriptSource(name)
		assert.NotContains(t, src, includePrefix, name)
		if strings.Contains(src, "local function fence(key)") {
			granting++
		}
	}
	assert.GreaterOrEqual(t, granting, 5, "acquire, fair_acquire, psem_acquire, rw_lock, rw_rlock")
}
