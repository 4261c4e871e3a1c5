package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterLockCommands are the commands dlock needs on a Redis Cluster, for
// each node: LockCommands with sharded pub/sub instead of the plain kind (a
// cluster Client announces releases by SPUBLISH in the release script and
// waits on SSUBSCRIBE), and what go-redis's ClusterClient itself sends:
// CLUSTER SLOTS to read the slot map (without it nothing works), COMMAND to
// read command metadata (without it every command costs a refused round
// trip and a go-redis log line), and ASKING before a command it follows
// to another node during a slot migration (without it a renewal that meets
// a half-moved slot is refused, which ends the hold as lost); and WAIT, for
// Clients made with WithReplicaAck only.
// integration/cluster_test.go shows that each of these is needed.
var ClusterLockCommands = []string{
	"evalsha", "eval",
	"set", "get", "del", "pexpire", "pttl", "type", "strlen", "incr", "time", "spublish",
	"ssubscribe", "sunsubscribe", "ping",
	"cluster|slots", "command", "asking", "wait",
}

// Cluster timing: a node is considered failing after clusterNodeTimeout
// without an answer, and a replica of a failed primary is promoted a little
// later (rank delay and a random 0-500ms on top).
const clusterNodeTimeout = 2000 * time.Millisecond

// Cluster is a Redis Cluster of six local redis-server processes on loopback
// (three primaries with one replica each), without persistence, stopped when
// the test ends. Every node has the ACL user LockUser with the cluster rule
// (LockRule with ClusterLockCommands): Client connects as that user, Admin and
// AdminAt as the default user with every right. When a node stops (Kill, the
// end of the test) the harness reads its ACL LOG and fails the test if
// LockUser was refused anything, unless the test called ExpectDenials.
type Cluster struct {
	tb    testing.TB
	bin   string
	procs []*clusterProc // in start order

	mu        sync.Mutex
	denialsOK bool
}

// clusterProc is one redis-server process of the cluster.
type clusterProc struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan error
	dead   bool // killed; guarded by Cluster.mu
}

// ClusterNode is one node as the cluster sees it (CLUSTER NODES).
type ClusterNode struct {
	// Addr is the node's host:port.
	Addr string
	// ID is the node's cluster id.
	ID string
	// Primary reports whether the node is a primary.
	Primary bool
	// PrimaryID is a replica's primary's id; empty for a primary.
	PrimaryID string
	// Slots are a primary's slot ranges, first and last slot included.
	Slots [][2]int
	// Failed reports that the cluster flags the node as failing (fail or
	// fail?), as a killed node is.
	Failed bool
}

// Serves reports whether the node is the primary that serves slot.
func (n ClusterNode) Serves(slot uint16) bool {
	for _, r := range n.Slots {
		if int(slot) >= r[0] && int(slot) <= r[1] {
			return true
		}
	}
	return false
}

// StartCluster starts six local redis-server processes in cluster mode on
// free loopback ports, creates the cluster with redis-cli --cluster create
// (three primaries, one replica each), creates LockUser on every node, and
// returns once every node reports cluster_state:ok, agrees on the slot map,
// and every replica is in sync with its primary. It needs redis-server and
// redis-cli on PATH: without them the test is skipped, or fails under
// DLOCK_REQUIRE_REDIS=1.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin, err1 := exec.LookPath("redis-server")
	cli, err2 := exec.LookPath("redis-cli")
	if err := errors.Join(err1, err2); err != nil {
		msg := "a Redis Cluster test needs redis-server and redis-cli on PATH (apt-get install redis-server): " + err.Error()
		if RequireRedis() {
			tb.Fatalf("DLOCK_REQUIRE_REDIS=1: %s", msg)
		}
		tb.Skip(msg)
	}
	c := &Cluster{tb: tb, bin: bin}
	tb.Cleanup(c.stopAll)
	var wg sync.WaitGroup
	procs := make([]*clusterProc, 6)
	errs := make([]error, 6)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = c.startNode(tb.TempDir())
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if p != nil {
			c.procs = append(c.procs, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("testserver: cluster node did not start: %v", err)
	}
	args := []string{"--cluster", "create"}
	for _, p := range c.procs {
		args = append(args, p.addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("testserver: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// startNode starts one node in dir on free ports (a client port and a
// cluster bus port), retrying when another process takes a port first, and
// creates LockUser on it.
func (c *Cluster) startNode(dir string) (*clusterProc, error) {
	var last error
	for range 5 {
		port, bus := freePort(c.tb), freePort(c.tb)
		if port == bus {
			continue
		}
		p := &clusterProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
		argv := []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--protected-mode", "no",
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
		}
		if last = c.run(p, argv); last == nil {
			return p, nil
		}
	}
	return nil, last
}

// run starts p's process with argv and waits until it answers; then it
// creates LockUser on it.
func (c *Cluster) run(p *clusterProc, argv []string) error {
	cmd := exec.Command(c.bin, argv...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{b: out, mu: &c.mu}, &lockedWriter{b: out, mu: &c.mu}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ping(p.addr, nil) == nil {
			if err := createClusterLockUser(p.addr); err != nil {
				_ = cmd.Process.Kill()
				<-exited
				return fmt.Errorf("%s: %v: %s", p.addr, err, c.logOf(out))
			}
			p.cmd, p.out, p.exited = cmd, out, exited
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited (%v): %s", p.addr, err, c.logOf(out))
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("no answer on %s within 10s: %s", p.addr, c.logOf(out))
}

// lockedWriter serialises the process's output into a buffer that Log reads.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (c *Cluster) logOf(b *bytes.Buffer) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return b.String()
}

// createClusterLockUser creates LockUser on the node at addr with the cluster
// rule, "*" standing for the lock names.
func createClusterLockUser(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer admin.Close()
	args := []any{"ACL", "SETUSER", LockUser}
	for _, t := range append(LockRule(lockPassword, []string{"*"}, append(append([]string{}, ClusterLockCommands...), FamilyCommands...)...), FamilyChannels...) {
		args = append(args, t)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("ACL SETUSER %s: %w", LockUser, err)
	}
	return nil
}

// LockUser returns the name and password of the user Client connects as.
func (c *Cluster) LockUser() (name, password string) { return LockUser, lockPassword }

// Addrs returns the addresses of the nodes still running, in start order.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var addrs []string
	for _, p := range c.procs {
		if !p.dead {
			addrs = append(addrs, p.addr)
		}
	}
	return addrs
}

// Client returns a go-redis cluster client that authenticates as LockUser on
// every node: give it to dlock. It is closed when the test ends; opts, if
// given, adjust its options first.
func (c *Cluster) Client(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	o := &redis.ClusterOptions{Addrs: c.Addrs(), Username: LockUser, Password: lockPassword}
	return c.newClient(o, opts)
}

// Admin returns a go-redis cluster client as the default user, with every
// right, for what a test does to Redis itself. It is closed when the test
// ends; opts, if given, adjust its options first.
func (c *Cluster) Admin(opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	return c.newClient(&redis.ClusterOptions{Addrs: c.Addrs()}, opts)
}

func (c *Cluster) newClient(o *redis.ClusterOptions, opts []func(*redis.ClusterOptions)) *redis.ClusterClient {
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClusterClient(o)
	c.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// AdminAt returns a client for the one node at addr as the default user (no
// redirections followed): to read what that node holds (GET, PTTL, CLIENT
// LIST, ROLE, ...). It is closed when the test ends.
func (c *Cluster) AdminAt(addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Log returns what the node at addr has printed.
func (c *Cluster) Log(addr string) string {
	for _, p := range c.procs {
		if p.addr == addr && p.out != nil {
			return c.logOf(p.out)
		}
	}
	return ""
}

// Nodes returns every node as a running node sees the cluster, in address
// order.
func (c *Cluster) Nodes() []ClusterNode {
	c.tb.Helper()
	var last error
	for _, addr := range c.Addrs() {
		nodes, err := clusterNodes(addr)
		if err == nil {
			return nodes
		}
		last = err
	}
	c.tb.Fatalf("testserver: CLUSTER NODES: no node answered: %v", last)
	return nil
}

// Primaries returns the primaries that serve slots and are not failing.
func (c *Cluster) Primaries() []ClusterNode {
	c.tb.Helper()
	var out []ClusterNode
	for _, n := range c.Nodes() {
		if n.Primary && !n.Failed && len(n.Slots) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// PrimaryFor returns the primary that serves slot.
func (c *Cluster) PrimaryFor(slot uint16) ClusterNode {
	c.tb.Helper()
	for _, n := range c.Primaries() {
		if n.Serves(slot) {
			return n
		}
	}
	c.tb.Fatalf("testserver: no primary serves slot %d", slot)
	return ClusterNode{}
}

// ReplicaOf returns the replica of the primary at primaryAddr that is not
// failing.
func (c *Cluster) ReplicaOf(primaryAddr string) ClusterNode {
	c.tb.Helper()
	nodes := c.Nodes()
	id := ""
	for _, n := range nodes {
		if n.Addr == primaryAddr {
			id = n.ID
		}
	}
	for _, n := range nodes {
		if id != "" && n.PrimaryID == id && !n.Failed {
			return n
		}
	}
	c.tb.Fatalf("testserver: no replica of %s", primaryAddr)
	return ClusterNode{}
}

// node returns the node at addr.
func (c *Cluster) node(addr string) ClusterNode {
	c.tb.Helper()
	for _, n := range c.Nodes() {
		if n.Addr == addr {
			return n
		}
	}
	c.tb.Fatalf("testserver: no cluster node at %s", addr)
	return ClusterNode{}
}

// clusterNodes reads CLUSTER NODES from the node at addr.
func clusterNodes(addr string) ([]ClusterNode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	text, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(text)
}

// parseClusterNodes reads the lines of CLUSTER NODES:
// <id> <ip:port@cport> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...
func parseClusterNodes(text string) ([]ClusterNode, error) {
	var nodes []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		n := ClusterNode{Addr: addr, ID: f[0], Primary: slices.Contains(flags, "master"),
			Failed: slices.Contains(flags, "fail") || slices.Contains(flags, "fail?")}
		if f[3] != "-" {
			n.PrimaryID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("CLUSTER NODES slot %q", s)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("CLUSTER NODES slot %q", s)
				}
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Addr < nodes[j].Addr })
	return nodes, nil
}

// WaitHealthy waits up to timeout until the running nodes are a healthy
// cluster, and fails the test otherwise: each reports cluster_state:ok, all
// see the same primaries serving the same slots (16384 of them), none sees a
// running node as failing, and every running replica is in sync with its
// primary. Call it after Kill, once the cluster should have promoted a
// replica.
func (c *Cluster) WaitHealthy(timeout time.Duration) {
	c.tb.Helper()
	var why error
	deadline := time.Now().Add(timeout)
	for {
		if why = c.healthy(); why == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.tb.Fatalf("testserver: cluster not healthy within %v: %v", timeout, why)
}

// healthy returns why the running nodes are not yet a healthy cluster, or nil.
func (c *Cluster) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs := c.Addrs()
	view := ""
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		info, err := rdb.ClusterInfo(ctx).Result()
		var text, repl string
		if err == nil {
			text, err = rdb.ClusterNodes(ctx).Result()
		}
		if err == nil {
			repl, err = rdb.Info(ctx, "replication").Result()
		}
		_ = rdb.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: not cluster_state:ok", addr)
		}
		nodes, err := parseClusterNodes(text)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		v, err := slotView(nodes, addrs)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if view == "" {
			view = v
		} else if v != view {
			return fmt.Errorf("%s sees %s, another node %s", addr, v, view)
		}
		if strings.Contains(repl, "role:slave") &&
			(!strings.Contains(repl, "master_link_status:up") || !strings.Contains(repl, "master_sync_in_progress:0")) {
			return fmt.Errorf("replica %s not in sync", addr)
		}
	}
	return nil
}

// slotView describes who serves what as one node sees it, for comparison
// with the other nodes' views: every running node must be known and not
// failing, every slot served by a running primary, and no slot half-moved.
func slotView(nodes []ClusterNode, running []string) (string, error) {
	known := map[string]ClusterNode{}
	for _, n := range nodes {
		known[n.Addr] = n
	}
	var b strings.Builder
	total := 0
	for _, addr := range running {
		n, ok := known[addr]
		switch {
		case !ok:
			return "", fmt.Errorf("does not know %s", addr)
		case n.Failed:
			return "", fmt.Errorf("sees %s failing", addr)
		}
		if n.Primary {
			fmt.Fprintf(&b, "%s:%v ", n.Addr, n.Slots)
			for _, r := range n.Slots {
				total += r[1] - r[0] + 1
			}
		} else {
			fmt.Fprintf(&b, "%s<%s ", n.Addr, n.PrimaryID)
		}
	}
	if total != 16384 {
		return "", fmt.Errorf("running primaries serve %d slots", total)
	}
	return b.String(), nil
}

// Kill stops the node at addr at once with SIGKILL, after failing the test if
// the node refused LockUser anything (see ExpectDenials). The cluster
// notices after its node timeout (2s) and promotes the node's replica a
// little later: wait for that with WaitHealthy.
func (c *Cluster) Kill(addr string) {
	c.tb.Helper()
	for _, p := range c.procs {
		if p.addr == addr {
			c.stop(p)
			return
		}
	}
	c.tb.Fatalf("testserver: Kill: no cluster node at %s", addr)
}

// stop checks p's ACL LOG, then kills it.
func (c *Cluster) stop(p *clusterProc) {
	c.mu.Lock()
	dead := p.dead
	p.dead = true
	c.mu.Unlock()
	if dead || p.cmd == nil {
		return
	}
	c.checkDenials(p.addr)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stopAll stops every node at the end of the test.
func (c *Cluster) stopAll() {
	for _, p := range c.procs {
		c.stop(p)
	}
}

// ExpectDenials tells the harness that the test makes the cluster refuse
// LockUser on purpose: the nodes' ACL LOGs are then not checked.
func (c *Cluster) ExpectDenials() {
	c.mu.Lock()
	c.denialsOK = true
	c.mu.Unlock()
}

// checkDenials fails the test if the node at addr refused LockUser anything.
func (c *Cluster) checkDenials(addr string) {
	c.mu.Lock()
	ok := c.denialsOK
	c.mu.Unlock()
	if ok {
		return
	}
	if refused := lockUserRefusals(&redis.Options{Addr: addr, MaxRetries: -1}); len(refused) > 0 {
		c.tb.Errorf("testserver: cluster node %s refused %s (ACL LOG): %s. Either dlock needs a right that the "+
			"cluster rule (ClusterLockCommands) lacks, or the test sent its own commands through Client: use "+
			"Admin for those, or call ExpectDenials if the refusal is the point of the test",
			addr, LockUser, strings.Join(refused, "; "))
	}
}

// Failover runs CLUSTER FAILOVER on the replica at replicaAddr (a manual
// failover: the primary stops taking writes, the replica catches up and takes
// over, no write is lost) and waits until the replica is a primary and the
// cluster is healthy again.
func (c *Cluster) Failover(replicaAddr string) {
	c.tb.Helper()
	ctx, cancel := ctxTimeout()
	defer cancel()
	rdb := c.AdminAt(replicaAddr)
	if err := rdb.ClusterFailover(ctx).Err(); err != nil {
		c.tb.Fatalf("testserver: CLUSTER FAILOVER on %s: %v", replicaAddr, err)
	}
	WaitFor(c.tb, 20*time.Second, replicaAddr+" to become a primary", func() bool {
		role, err := rdb.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	c.WaitHealthy(20 * time.Second)
}

// A Migration moves one hash slot from its primary to another by the steps
// of Redis's live resharding (what redis-cli --cluster reshard does), one at
// a time, so that a test can act while the slot is half-moved: BeginMigration
// marks the slot IMPORTING on the target and MIGRATING on the source; while
// it is so, a command for a key that is already gone from the source gets an
// ASK redirection to the target. MoveKeys and MoveKey move keys; Finish
// assigns the slot to the target on every primary.
type Migration struct {
	c        *Cluster
	Slot     uint16
	From, To ClusterNode
	src, dst *redis.Client
	finished bool
}

// MigrateSlot moves slot to the primary at toAddr with all its keys and
// waits until every node agrees.
func (c *Cluster) MigrateSlot(slot uint16, toAddr string) {
	c.tb.Helper()
	m := c.BeginMigration(slot, toAddr)
	m.MoveKeys(0)
	m.Finish()
}

// BeginMigration starts moving slot to the primary at toAddr: CLUSTER
// SETSLOT <slot> IMPORTING <source id> on the target, then CLUSTER SETSLOT
// <slot> MIGRATING <target id> on the source. No key has moved yet.
func (c *Cluster) BeginMigration(slot uint16, toAddr string) *Migration {
	c.tb.Helper()
	from := c.PrimaryFor(slot)
	to := c.node(toAddr)
	if !to.Primary || to.Addr == from.Addr {
		c.tb.Fatalf("testserver: migrate slot %d: %s is not another primary than %s", slot, toAddr, from.Addr)
	}
	m := &Migration{c: c, Slot: slot, From: from, To: to, src: c.AdminAt(from.Addr), dst: c.AdminAt(to.Addr)}
	ctx, cancel := ctxTimeout()
	defer cancel()
	if err := m.dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.ID).Err(); err != nil {
		c.tb.Fatalf("testserver: CLUSTER SETSLOT %d IMPORTING on %s: %v", slot, to.Addr, err)
	}
	if err := m.src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.ID).Err(); err != nil {
		c.tb.Fatalf("testserver: CLUSTER SETSLOT %d MIGRATING on %s: %v", slot, from.Addr, err)
	}
	return m
}

// Keys returns the keys of the slot still on the source.
func (m *Migration) Keys() []string {
	m.c.tb.Helper()
	ctx, cancel := ctxTimeout()
	defer cancel()
	keys, err := m.src.ClusterGetKeysInSlot(ctx, int(m.Slot), 1000).Result()
	if err != nil {
		m.c.tb.Fatalf("testserver: CLUSTER GETKEYSINSLOT %d on %s: %v", m.Slot, m.From.Addr, err)
	}
	return keys
}

// MoveKeys moves up to n of the slot's keys (all of them when n <= 0) from
// the source to the target, by CLUSTER GETKEYSINSLOT and MIGRATE ... KEYS in
// batches of ten, and returns how many it moved.
func (m *Migration) MoveKeys(n int) int {
	m.c.tb.Helper()
	moved := 0
	for n <= 0 || moved < n {
		keys := m.Keys()
		if len(keys) == 0 {
			break
		}
		keys = keys[:min(len(keys), 10)]
		if n > 0 {
			keys = keys[:min(len(keys), n-moved)]
		}
		m.MoveKey(keys...)
		moved += len(keys)
	}
	return moved
}

// MoveKey moves the given keys of the slot from the source to the target
// with one MIGRATE ... KEYS.
func (m *Migration) MoveKey(keys ...string) {
	m.c.tb.Helper()
	host, port, _ := net.SplitHostPort(m.To.Addr)
	args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	if err := m.src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) && err.Error() != "NOKEY" {
		m.c.tb.Fatalf("testserver: MIGRATE %v from %s to %s: %v", keys, m.From.Addr, m.To.Addr, err)
	}
}

// Finish ends the migration: CLUSTER SETSLOT <slot> NODE <target id> on the
// target, the source and the other primaries, then waits until every node
// agrees and the cluster is healthy. Keys still on the source are moved
// first.
func (m *Migration) Finish() {
	m.c.tb.Helper()
	if m.finished {
		return
	}
	m.finished = true
	m.MoveKeys(0)
	ctx, cancel := ctxTimeout()
	defer cancel()
	order := []string{m.To.Addr, m.From.Addr}
	for _, p := range m.c.Primaries() {
		if p.Addr != m.To.Addr && p.Addr != m.From.Addr {
			order = append(order, p.Addr)
		}
	}
	for _, addr := range order {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		err := rdb.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.To.ID).Err()
		_ = rdb.Close()
		if err != nil {
			m.c.tb.Fatalf("testserver: CLUSTER SETSLOT %d NODE on %s: %v", m.Slot, addr, err)
		}
	}
	m.c.WaitHealthy(20 * time.Second)
	for _, addr := range m.c.Addrs() {
		WaitFor(m.c.tb, 10*time.Second, fmt.Sprintf("%s to see slot %d on %s", addr, m.Slot, m.To.Addr), func() bool {
			nodes, err := clusterNodes(addr)
			if err != nil {
				return false
			}
			for _, n := range nodes {
				if n.Serves(m.Slot) {
					return n.Addr == m.To.Addr
				}
			}
			return false
		})
	}
}
