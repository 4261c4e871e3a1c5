// Command dlock is flock(1) for a fleet: it runs a command while holding a
// dlock lock on Redis, renewed by the watchdog, and stops the command if the
// lock is lost. It also shows and clears locks, and tells the library's story.
//
//	dlock run [flags] NAME -- COMMAND [ARGS...]
//	dlock status [--json] NAME...
//	dlock unlock --force NAME
//	dlock demo
//
// Install with go install github.com/dlock-go/dlock/cmd/dlock@latest; run
// dlock help or dlock COMMAND --help for details. Exit statuses are listed by
// dlock help and in the README.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses of dlock itself. A command run by `dlock run` passes its own
// status through (128+N when a signal N ended it), so a command that exits
// with one of these numbers looks like dlock's; the one-line message on
// stderr tells them apart.
const (
	exitOK          = 0
	exitUsage       = 64  // bad flags or arguments
	exitDataErr     = 65  // the key holds data that is not a dlock lock
	exitUnavailable = 69  // Redis unreachable, or it refused a command
	exitSoftware    = 70  // an internal error
	exitNotAcquired = 75  // run: the lock was not acquired within --wait
	exitLost        = 79  // run: the lock was lost while the command ran; the command was stopped
	exitCannotExec  = 126 // run: the command was found but could not be started
	exitNotFound    = 127 // run: the command was not found
)

// exitTable is the table of exit statuses printed by `dlock help` and kept in
// the README (a test checks that they agree).
var exitTable = [][2]string{
	{"0", "success; for run: the command exited 0"},
	{"1-255", "run: the command's own exit status (128+N if signal N ended it)"},
	{"64", "usage error: bad flags or arguments"},
	{"65", "the key holds data that is not a dlock lock (left untouched)"},
	{"69", "Redis unreachable, or it refused a command"},
	{"70", "internal error"},
	{"75", "run: the lock was not acquired within --wait"},
	{"79", "run: the lock was lost while the command ran; the command got SIGTERM (SIGKILL after --kill-after)"},
	{"126", "run: the command could not be started"},
	{"127", "run: the command was not found"},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches a command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "status":
		return cmdStatus(args[1:], stdout, stderr)
	case "unlock":
		return cmdUnlock(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "version", "--version", "-version", "-v":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "dlock: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `dlock: distributed locks on Redis, from the shell.

Usage:
  dlock run [flags] NAME -- COMMAND [ARGS...]   run COMMAND while holding the lock NAME
  dlock status [--json] NAME...                 show locks: held or free, TTL, last fencing token
  dlock unlock --force NAME                     delete a lock whoever holds it (operator override)
  dlock demo [--redis URL]                      the duplicate-delivery story, live
  dlock version                                 print the version
  dlock help [COMMAND]                          this text, or a command's

Every command takes --redis URL (default $REDIS_URL, then redis://127.0.0.1:6379;
redis+cluster://host:port?addr=... for a cluster, redis+sentinel://host:port?master_name=...
for Sentinel), --log-level debug|info|warn|error and --log-format text|json.

Examples:
  dlock run nightly-report -- ./report.sh --full
  dlock run --wait 0 --redis redis://cache:6379 import -- python import.py
  dlock status --json nightly-report import
  dlock unlock --force nightly-report

Exit statuses:
`)
	for _, r := range exitTable {
		fmt.Fprintf(w, "  %-6s %s\n", r[0], r[1])
	}
}
