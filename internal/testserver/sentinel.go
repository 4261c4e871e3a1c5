package testserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SentinelGroup is a primary, a replica and three sentinels watching them,
// all local redis-server processes on loopback, stopped when the test ends.
type SentinelGroup struct {
	// Master is the name the sentinels know the primary by.
	Master string
	// Primary and Replica are the data servers; after a failover their roles
	// swap. Replicas holds every replica (Replica is the first).
	Primary, Replica *Redis
	Replicas         []*Redis
	// Sentinels are the sentinels' host:port addresses.
	Sentinels []string
}

// StartSentinelGroup starts a primary, a replica of it, and three sentinels
// (quorum 2) that consider the primary down after one second without an
// answer and then promote the replica. It needs a local redis-server.
func StartSentinelGroup(tb testing.TB) *SentinelGroup { return StartSentinelGroupN(tb, 1) }

// StartSentinelGroupN is StartSentinelGroup with n replicas.
func StartSentinelGroupN(tb testing.TB, n int) *SentinelGroup {
	tb.Helper()
	primary := StartRedis(tb)
	primary.RequireLocal()
	g := &SentinelGroup{Master: "dlockmaster", Primary: primary}
	for range n {
		g.Replicas = append(g.Replicas, StartRedis(tb, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port)))
	}
	g.Replica = g.Replicas[0]
	WaitFor(tb, 10*time.Second, "the replicas to sync", func() bool {
		info, err := primary.Admin().Info(context.Background(), "replication").Result()
		return err == nil && bytes.Contains([]byte(info), []byte(fmt.Sprintf("connected_slaves:%d", n))) &&
			bytes.Count([]byte(info), []byte("state=online")) == n
	})
	// "online" on the primary comes before a replica has loaded what it was
	// sent and acknowledges writes (up to a second later here).
	WaitFor(tb, 10*time.Second, "the replicas to acknowledge a write", func() bool {
		ctx := context.Background()
		primary.Admin().Set(ctx, "dlock:fence:sync-probe", "1", time.Second)
		return primary.Admin().Wait(ctx, n, 100*time.Millisecond).Val() == int64(n)
	})
	for i := range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(tb, g.Master, primary.port, i))
	}
	return g
}

// startSentinel starts one sentinel and returns its address.
func startSentinel(tb testing.TB, master string, primaryPort, i int) string {
	tb.Helper()
	dir := tb.TempDir()
	var last error
	for range 5 {
		port := freePort(tb)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
protected-mode no
dir %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 5000
sentinel parallel-syncs %s 1
`, port, dir, master, primaryPort, master, master, master)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(bin, conf, "--sentinel")
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		setDeathSignal(cmd)
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		tb.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if ping(addr, nil) == nil {
				return addr
			}
			select {
			case err := <-exited:
				last = fmt.Errorf("sentinel exited (%v): %s", err, out.String())
			case <-time.After(10 * time.Millisecond):
				continue
			}
			break
		}
		if last == nil {
			last = fmt.Errorf("sentinel on %s did not answer: %s", addr, out.String())
		}
	}
	tb.Fatalf("testserver: %v", last)
	return ""
}
