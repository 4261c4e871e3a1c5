package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionString names the module version and, when built from a checkout,
// the commit.
func versionString() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " commit " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("dlock %s%s %s", v, rev, runtime.Version())
}
