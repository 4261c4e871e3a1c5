package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// machine describes where and with what a run was made.
type machine struct {
	date, cpu, kernel, goVersion, redisVersion string
	cores                                      int
	versions                                   [][2]string // library, version
}

// versionOf lists the modules whose versions the report shows.
var versionOf = [][2]string{
	{"redsync", "github.com/go-redsync/redsync/v4"},
	{"bsm/redislock", "github.com/bsm/redislock"},
	{"rueidis (rueidislock)", "github.com/redis/rueidis"},
	{"go-redis", "github.com/redis/go-redis/v9"},
}

// describeMachine reads the CPU, kernel, toolchain, server and module versions.
func describeMachine(ctx context.Context, srv *serverStats) machine {
	m := machine{
		date:      time.Now().Format("2006-01-02 15:04 MST"),
		cpu:       cpuModel(),
		cores:     runtime.NumCPU(),
		kernel:    "unknown",
		goVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	m.redisVersion = "unknown"
	if f, err := srv.info(ctx, "server"); err == nil && f["redis_version"] != "" {
		m.redisVersion = f["redis_version"]
	}
	m.versions = append(m.versions, [2]string{"dlock", dlockVersion()})
	mods := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Path + " " + d.Replace.Version
			}
			mods[d.Path] = v
		}
	}
	for _, lv := range versionOf {
		v := mods[lv[1]]
		if v == "" {
			v = "unknown"
		}
		m.versions = append(m.versions, [2]string{lv[0], lv[1] + " " + v})
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// dlockVersion is "this checkout", with its commit when git knows it, and a
// note when the library's files (outside bench/) differ from that commit.
func dlockVersion() string {
	v := "this checkout"
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return v
	}
	v += " (" + strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD", "--", ":(top)", ":(top,exclude)bench").Run(); err != nil {
		v += ", with uncommitted changes"
	}
	return v + ")"
}
