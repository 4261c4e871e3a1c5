package demo

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// style is how a timeline line is shown on a terminal.
type style int

const (
	plain style = iota
	good        // green: acquired, shipped
	warn        // yellow: waiting, skipping, stalling
	bad         // red: lost, rejected
)

// timeline prints events with the time since the story began, one line each,
// with ANSI colour when color is set.
type timeline struct {
	mu    sync.Mutex
	out   io.Writer
	color bool
	start time.Time
}

var workerColors = []string{"\x1b[36m", "\x1b[35m", "\x1b[34m"} // cyan, magenta, blue

func (t *timeline) say(worker int, s style, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	who := fmt.Sprintf("worker-%d", worker)
	at := fmt.Sprintf("%6.3fs", time.Since(t.start).Seconds())
	if !t.color {
		fmt.Fprintf(t.out, "%s  %-8s  %s\n", at, who, msg)
		return
	}
	const reset = "\x1b[0m"
	codes := map[style]string{plain: "", good: "\x1b[32m", warn: "\x1b[33m", bad: "\x1b[1;31m"}
	fmt.Fprintf(t.out, "\x1b[2m%s\x1b[0m  %s%-8s%s  %s%s%s\n", at,
		workerColors[(worker-1)%len(workerColors)], who, reset, codes[s], msg, reset)
}
