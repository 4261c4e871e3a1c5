package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// common are the flags every command takes.
type common struct {
	redisURL  string
	logLevel  string
	logFormat string
}

func (c *common) add(fs *flag.FlagSet) {
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL (default $REDIS_URL, then redis://127.0.0.1:6379); redis+cluster:// and redis+sentinel:// too")
	fs.StringVar(&c.logLevel, "log-level", "error", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
}

// logger returns the slog logger the flags ask for, writing to w.
func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(c.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", c.logFormat)
	}
}

// command describes a subcommand for its --help.
type command struct {
	name, synopsis, about, examples string
}

// newFlagSet returns the flag set of a subcommand.
func newFlagSet(cmd command) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args; when it returns false, the command exits with code:
// 0 after --help (usage on stdout), 64 after a bad flag (usage on stderr).
func parse(fs *flag.FlagSet, cmd command, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout, fs, cmd)
		return exitOK, false
	}
	fmt.Fprintf(stderr, "dlock %s: %v\n\n", cmd.name, err)
	printUsage(stderr, fs, cmd)
	return exitUsage, false
}

func printUsage(w io.Writer, fs *flag.FlagSet, cmd command) {
	fmt.Fprintf(w, "Usage: dlock %s\n\n%s\n\nFlags:\n", cmd.synopsis, strings.TrimSpace(cmd.about))
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}

// usageError reports bad arguments found after parsing.
func usageError(stderr io.Writer, fs *flag.FlagSet, cmd command, format string, args ...any) int {
	fmt.Fprintf(stderr, "dlock %s: %s\n\n", cmd.name, fmt.Sprintf(format, args...))
	printUsage(stderr, fs, cmd)
	return exitUsage
}

// waitFlag is --wait: a duration, or unset for "until acquired".
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	w.d, w.set = d, true
	return nil
}
