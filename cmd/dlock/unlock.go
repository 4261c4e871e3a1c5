package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dlock-go/dlock"
)

var unlockCmd = command{
	name:     "unlock",
	synopsis: "unlock --force NAME...",
	about: `Delete a lock whoever holds it: the operator's override for a lock whose
holder is gone or stuck. The holder learns of it at its next renewal (a
"dlock run" holder stops its command). Says what it deleted. A key that holds
data dlock did not write is never deleted (exit 65).`,
	examples: `  dlock status nightly-report && dlock unlock --force nightly-report`,
}

func cmdUnlock(args []string, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet(unlockCmd)
	force := fs.Bool("force", false, "required: confirms that you mean to delete a lock another process may hold")
	c.add(fs)
	if code, ok := parse(fs, unlockCmd, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(stderr, fs, unlockCmd, "missing NAME")
	}
	if !*force {
		return usageError(stderr, fs, unlockCmd, "refusing without --force: this deletes a lock that another process may hold")
	}
	log, err := c.logger(stderr)
	if err != nil {
		return usageError(stderr, fs, unlockCmd, "%v", err)
	}
	ctx := context.Background()
	rdb, err := connect(ctx, c.redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "dlock unlock: %v\n", err)
		return exitUnavailable
	}
	defer rdb.Close()
	client, err := dlock.New(rdb, dlock.WithLogger(log))
	if err != nil {
		fmt.Fprintf(stderr, "dlock unlock: %v\n", err)
		return exitSoftware
	}
	defer client.Close()

	code := exitOK
	for _, name := range fs.Args() {
		m := client.NewMutex(name)
		before, err := m.Inspect(ctx)
		if err == nil {
			var deleted bool
			if deleted, err = m.ForceUnlock(ctx); err == nil {
				switch {
				case !deleted:
					fmt.Fprintf(stdout, "lock %q was not held; nothing deleted\n", name)
				case before.TTL == dlock.NoExpiry:
					fmt.Fprintf(stdout, "deleted lock %q (key %q, no expiry; last fencing token %d)\n", name, name, before.LastFencingToken)
				default:
					fmt.Fprintf(stdout, "deleted lock %q (key %q, %v of its lease left; last fencing token %d)\n",
						name, name, before.TTL.Round(time.Millisecond), before.LastFencingToken)
				}
				continue
			}
		}
		fmt.Fprintf(stderr, "dlock unlock: %v\n", err)
		code = max(code, errorStatus(err))
	}
	return code
}
