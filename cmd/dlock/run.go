package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

var runCmd = command{
	name:     "run",
	synopsis: "run [flags] NAME -- COMMAND [ARGS...]",
	about: `Acquire the lock NAME, run COMMAND while the watchdog renews the lease, and
release the lock when COMMAND exits; exit with COMMAND's status. COMMAND sees
DLOCK_NAME and DLOCK_FENCING_TOKEN in its environment: pass the token to
storage that can reject a stale writer.

COMMAND runs in a process group of its own. SIGINT, SIGTERM and SIGHUP are
forwarded to that group (while waiting for the lock they stop the wait
instead); the lock is released after COMMAND exits. If the lock is lost (its
lease could not be confirmed, or someone deleted it), the group gets SIGTERM,
then SIGKILL after --kill-after, so nothing COMMAND started keeps running
without the lock, and dlock exits 79 with a one-line reason on stderr. Not
acquired within --wait: exit 75. Library warnings are logged only with
--log-level warn or lower.`,
	examples: `  dlock run nightly-report -- ./report.sh --full
  dlock run --wait 30s import -- python import.py          # give up after 30s (exit 75)
  dlock run --wait 0 cron-cleanup -- ./cleanup.sh          # one try
  dlock run --lease 5m quick-task -- ./task.sh             # fixed 5m lease, no renewal
  dlock run --redis redis+sentinel://s1:26379?master_name=main job -- ./job.sh`,
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	var c common
	var wait waitFlag
	fs := newFlagSet(runCmd)
	fs.Var(&wait, "wait", "how long (a `duration`) to wait for the lock; 0 = one try (default: until acquired)")
	lease := fs.Duration("lease", 0, "fixed lease, never renewed: COMMAND is stopped when it runs out (default: renewed by the watchdog)")
	wdt := fs.Duration("watchdog-timeout", dlock.DefaultWatchdogTimeout, "lease that the watchdog renews every third of it")
	killAfter := fs.Duration("kill-after", 10*time.Second, "after the lock is lost and COMMAND got SIGTERM, SIGKILL it after this grace")
	c.add(fs)
	if code, ok := parse(fs, runCmd, args, stdout, stderr); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "--" {
		return usageError(stderr, fs, runCmd, "missing NAME")
	}
	name, argv := rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	switch {
	case len(argv) == 0:
		return usageError(stderr, fs, runCmd, "missing COMMAND after NAME --")
	case *lease < 0 || *wdt <= 0 || *killAfter < 0:
		return usageError(stderr, fs, runCmd, "--lease, --kill-after must not be negative and --watchdog-timeout must be positive")
	}
	log, err := c.logger(stderr)
	if err != nil {
		return usageError(stderr, fs, runCmd, "%v", err)
	}

	// Signals: while waiting they end the wait; once COMMAND runs they are
	// forwarded to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	rdb, err := connect(context.Background(), c.redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "dlock run: %v\n", err)
		return exitUnavailable
	}
	defer rdb.Close()
	client, err := dlock.New(rdb, dlock.WithLogger(log), dlock.WithWatchdogTimeout(*wdt))
	if err != nil {
		return usageError(stderr, fs, runCmd, "%v", err)
	}
	defer client.Close()
	var mopts []dlock.MutexOption
	if *lease > 0 {
		mopts = append(mopts, dlock.WithLeaseTime(*lease))
	}
	m := client.NewMutex(name, mopts...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // after supervise has released the lock
	if code, ok := acquire(ctx, cancel, m, wait, sigs, stderr); !ok {
		return code
	}
	log.Info("dlock run: acquired", "name", name, "command", argv[0])
	return supervise(m, name, argv, *killAfter, sigs, stdout, stderr)
}

// acquire takes the lock, or reports why not with the status to exit with.
// The hold is bound to ctx, which only cancel ends: a signal while waiting
// cancels it, and the caller cancels it once COMMAND is over, so a signal
// never releases a lock that COMMAND is using.
func acquire(ctx context.Context, cancel context.CancelFunc, m *dlock.Mutex, wait waitFlag,
	sigs <-chan os.Signal, stderr io.Writer) (int, bool) {
	type result struct {
		ok  bool
		err error
	}
	got := make(chan result, 1)
	go func() {
		if !wait.set {
			err := m.Lock(ctx)
			got <- result{err == nil, err}
			return
		}
		ok, err := m.TryLock(ctx, wait.d)
		got <- result{ok, err}
	}()
	var r result
	select {
	case r = <-got:
	case s := <-sigs:
		cancel()
		if r = <-got; r.ok {
			_ = m.Unlock(context.Background())
		}
		fmt.Fprintf(stderr, "dlock run: %v while waiting for lock %q; not run\n", s, m.Name())
		return 128 + int(s.(syscall.Signal)), false
	}
	switch {
	case r.ok:
		return 0, true
	case r.err == nil:
		fmt.Fprintf(stderr, "dlock run: lock %q not acquired within %v\n", m.Name(), wait.d)
		return exitNotAcquired, false
	case errors.Is(r.err, dlock.ErrWrongType):
		fmt.Fprintf(stderr, "dlock run: %v\n", r.err)
		return exitDataErr, false
	case errors.Is(r.err, dlock.ErrInvalidArgument):
		fmt.Fprintf(stderr, "dlock run: %v\n", r.err)
		return exitUsage, false
	default:
		fmt.Fprintf(stderr, "dlock run: %v\n", r.err)
		return exitUnavailable, false
	}
}

// supervise runs COMMAND while the lock is held and returns the exit status.
func supervise(m *dlock.Mutex, name string, argv []string, killAfter time.Duration,
	sigs <-chan os.Signal, stdout, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "DLOCK_NAME="+name, "DLOCK_FENCING_TOKEN="+strconv.FormatInt(m.FencingToken(), 10))
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = unlock(m)
		fmt.Fprintf(stderr, "dlock run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	lost := m.Done()
	var killed <-chan time.Time
	wasLost := false
	for {
		select {
		case <-exited:
			err := unlock(m)
			switch {
			case wasLost:
				return exitLost
			case errors.Is(err, dlock.ErrLockLost):
				fmt.Fprintf(stderr, "dlock run: lock %q was lost while %s ran: %v\n", name, argv[0], err)
				return exitLost
			case err != nil:
				fmt.Fprintf(stderr, "dlock run: %v\n", err)
			}
			return status(cmd.ProcessState)
		case s := <-sigs:
			_ = signalGroup(cmd, s)
		case <-lost:
			lost, wasLost = nil, true
			fmt.Fprintf(stderr, "dlock run: lock %q lost (%v); sent SIGTERM to %s\n", name, m.Err(), argv[0])
			_ = signalGroup(cmd, syscall.SIGTERM)
			t := time.NewTimer(killAfter)
			defer t.Stop()
			killed = t.C
		case <-killed:
			killed = nil
			_ = signalGroup(cmd, syscall.SIGKILL)
		}
	}
}

// unlock releases the lock, bounded in time.
func unlock(m *dlock.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Unlock(ctx)
}

// status is a finished process's exit status as a shell reports it.
func status(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
