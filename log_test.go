package dlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the watchdog's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The Client logs acquisitions (debug), renewal trouble and losses (warn),
// always with the lock's name, and never the token.
func TestLogging(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newWatchdogFixture(t)
	f.c.log = log
	ctx := context.Background()

	m := f.lock("log:lock")
	token := m.current().token
	f.clk.Advance(wdInterval)
	f.nextPass().answer(0, errors.New("connection refused")) // renewal trouble
	f.clk.Advance(f.c.w.retry)
	f.nextPass().answer(0, nil) // the key is gone: lost
	waitClosed(t, m.Done(), "loss")
	require.ErrorIs(t, m.Unlock(ctx), ErrLockLost)

	out := buf.String()
	require.Contains(t, out, `level=DEBUG msg="dlock: acquired" name=log:lock fencing_token=`)
	require.Contains(t, out, `level=WARN msg="dlock: renewal failed, retrying until the lease runs out" name=log:lock`)
	require.Contains(t, out, `level=WARN msg="dlock: lock lost" name=log:lock reason="its key expired or was deleted"`)
	require.NotContains(t, out, token, "the token must never be logged")
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "level=DEBUG") {
			require.NotContains(t, line, "fencing_token", "fencing tokens only at debug")
		}
	}
}

// Without WithLogger nothing is logged, and nothing breaks.
func TestNoLoggerByDefault(t *testing.T) {
	c, _, _ := newMini(t)
	require.False(t, c.log.Enabled(context.Background(), slog.LevelError))
}
