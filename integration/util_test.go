package integration

import (
	"os"
	"strings"
	"testing"
)

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scriptSource returns ../scripts/<name>.lua with its "--#include <lib>"
// lines replaced by ../scripts/lib/<lib>.lua, as the library sends it.
func scriptSource(t testing.TB, name string) string {
	t.Helper()
	lines := strings.SplitAfter(mustRead(t, "../scripts/"+name+".lua"), "\n")
	for i, l := range lines {
		if lib, ok := strings.CutPrefix(strings.TrimSpace(l), "--#include "); ok {
			lines[i] = mustRead(t, "../scripts/lib/"+lib+".lua")
		}
	}
	return strings.Join(lines, "")
}
