package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/slot"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Redis Cluster tests, on six local redis-server processes (three primaries,
// one replica each; testserver.StartCluster). dlock connects through a
// go-redis ClusterClient as the harness's least-privilege user with the
// cluster rule (testserver.ClusterLockCommands), and the harness fails a test
// whose nodes refused that user anything.

// Leases of the cluster tests: 1s renewed every 250ms.
const (
	clusterLease = time.Second
	clusterRenew = 250 * time.Millisecond
)

// clusterOpts are the dlock options of the cluster tests.
func clusterOpts(opts ...dlock.Option) []dlock.Option {
	return append([]dlock.Option{dlock.WithWatchdogTimeout(clusterLease), dlock.WithRenewInterval(clusterRenew)}, opts...)
}

// pipelineCounter counts the script pipelines a ClusterClient sends to its
// nodes (not the handshakes of new connections, also pipelines): go-redis
// splits a cluster pipeline into one per node, each one round trip.
type pipelineCounter struct{ n atomic.Int64 }

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "evalsha" || c.Name() == "eval" {
				h.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// counted makes every node client of a ClusterClient report its pipelines to h.
func counted(h *pipelineCounter) func(*redis.ClusterOptions) {
	return func(o *redis.ClusterOptions) {
		o.NewClient = func(opt *redis.Options) *redis.Client {
			c := redis.NewClient(opt)
			c.AddHook(h)
			return c
		}
	}
}

// primaryOf returns the address of the primary in ps that serves slot s.
func primaryOf(t testing.TB, ps []testserver.ClusterNode, s uint16) string {
	t.Helper()
	for _, p := range ps {
		if p.Serves(s) {
			return p.Addr
		}
	}
	t.Fatalf("no primary serves slot %d", s)
	return ""
}

// namesOn returns n lock names with the given prefix whose slots the primary
// at addr serves, each in its own slot.
func namesOn(t testing.TB, ps []testserver.ClusterNode, addr, prefix string, n int) []string {
	t.Helper()
	var out []string
	seen := map[uint16]bool{}
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s:%d", prefix, i)
		s := slot.Of(name)
		if !seen[s] && primaryOf(t, ps, s) == addr {
			seen[s] = true
			out = append(out, name)
		}
	}
	return out
}

// pttlOn reads the PTTL of key on the node at addr, without redirection:
// after ASKING, so that it reads a key of a slot the node is importing.
func pttlOn(t testing.TB, cl *testserver.Cluster, addr, key string) time.Duration {
	t.Helper()
	var pttl *redis.DurationCmd
	_, err := cl.AdminAt(addr).Pipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Do(context.Background(), "ASKING")
		pttl = p.PTTL(context.Background(), key)
		return nil
	})
	if err != nil {
		t.Fatalf("ASKING, PTTL %s on %s: %v", key, addr, err)
	}
	return pttl.Val()
}

// Locks on 300 names spread over all three primaries and many slots, plus
// names with hash tags (two sharing one) and with empty tags: all are held
// across several renew intervals, their keys' TTLs stay fresh, and each
// renewal pass costs a round trip per node, not per lock. Inspect, Unlock,
// ForceUnlock work on every kind of name (no script ever touches two slots:
// a CROSSSLOT error would fail them), and fencing tokens increase per name
// from one holder to the next.
func TestClusterLocksAcrossSlots(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	admin := cl.Admin()
	var rt pipelineCounter
	a := newClient(t, cl.Client(counted(&rt)), clusterOpts()...)
	b := newClient(t, cl.Client(), clusterOpts()...)

	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("cluster:lock:%d", i))
	}
	tagged := []string{"{user:1}:a", "{user:1}:b", "a{}b", "{}", "{}{user:1}", "x{user:2}y{z}", "}{user:3}", "{user:1}"}
	names = append(names, tagged...)
	// The harness's slot function is the server's, for the unusual names too.
	for _, n := range tagged {
		got, err := admin.ClusterKeySlot(ctx, n).Result()
		if err != nil || uint16(got) != slot.Of(n) {
			t.Fatalf("CLUSTER KEYSLOT %q = %d, %v; slot.Of = %d", n, got, err, slot.Of(n))
		}
	}
	if slot.Of("{user:1}:a") != slot.Of("{user:1}:b") || slot.Of("a{}b") == slot.Of("{}") {
		t.Fatal("hash tags do not place the names as this test expects")
	}
	ps := cl.Primaries()
	if len(ps) != 3 {
		t.Fatalf("%d primaries, want 3", len(ps))
	}
	perPrimary := map[string]int{}
	slots := map[uint16]bool{}
	for _, n := range names {
		perPrimary[primaryOf(t, ps, slot.Of(n))]++
		slots[slot.Of(n)] = true
	}
	for _, p := range ps {
		if perPrimary[p.Addr] < 50 {
			t.Fatalf("only %d names on primary %s: %v", perPrimary[p.Addr], p.Addr, perPrimary)
		}
	}
	if len(slots) < 250 {
		t.Fatalf("the names cover only %d slots", len(slots))
	}

	// Acquire every name, 16 at a time.
	ms := make([]*dlock.Mutex, len(names))
	for i, n := range names {
		ms[i] = a.NewMutex(n)
	}
	lockAll(t, ctx, ms)
	first := make([]int64, len(ms))
	for i, m := range ms {
		first[i] = m.FencingToken()
		if first[i] <= 0 {
			t.Fatalf("%s: fencing token %d", m.Name(), first[i])
		}
	}
	// Warm up: every key renewed at least once (the scripts are cached).
	s0 := a.Stats()
	testserver.WaitFor(t, 10*time.Second, "every lock renewed once", func() bool {
		return a.Stats().Renewals >= s0.Renewals+uint64(len(ms))
	})
	s1, rt1 := a.Stats(), rt.n.Load()
	start := time.Now()
	testserver.WaitFor(t, 20*clusterRenew, "every lock renewed 3 more times", func() bool {
		return a.Stats().Renewals >= s1.Renewals+3*uint64(len(ms))
	})
	held := time.Since(start)
	s2, rt2 := a.Stats(), rt.n.Load()
	for _, m := range ms {
		if !m.IsHeld() {
			t.Fatalf("%s lost: %v", m.Name(), m.Err())
		}
	}
	passes := s2.Passes - s1.Passes
	renewals := s2.Renewals - s1.Renewals
	nodeTrips := rt2 - rt1
	t.Logf("over %v: %d passes, %d pipelines (dlock), %d node round trips, %d renewals, %d renewal errors, max pass %v",
		held, passes, s2.Pipelines-s1.Pipelines, nodeTrips, renewals, s2.RenewalErrors-s1.RenewalErrors, s2.MaxPass)
	if s2.RenewalErrors != s0.RenewalErrors || s2.Losses != 0 {
		t.Fatalf("renewal errors %d, losses %d", s2.RenewalErrors-s0.RenewalErrors, s2.Losses)
	}
	if passes == 0 || s2.Pipelines-s1.Pipelines > 2*passes {
		t.Fatalf("%d pipelines in %d passes: want at most 2 per pass", s2.Pipelines-s1.Pipelines, passes)
	}
	if pipes := s2.Pipelines - s1.Pipelines; nodeTrips > int64(len(ps))*int64(pipes) {
		t.Fatalf("%d node round trips for %d pipelines: want at most one per primary per pipeline", nodeTrips, pipes)
	}
	if passes > 40 {
		t.Fatalf("%d passes in %v for %d locks: renewals are not batched", passes, held, len(ms))
	}
	// The keys' TTLs are fresh: renewed within the last interval or so.
	pipe := admin.Pipeline()
	pttls := make([]*redis.DurationCmd, len(ms))
	for i, m := range ms {
		pttls[i] = pipe.PTTL(ctx, m.Name())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range pttls {
		if d := c.Val(); d < clusterLease-2*clusterRenew {
			t.Fatalf("%s: PTTL %v, not renewed lately (lease %v, renew every %v)", ms[i].Name(), d, clusterLease, clusterRenew)
		}
	}
	// Inspect on every kind of name.
	for _, m := range ms[len(ms)-len(tagged):] {
		st, err := m.Inspect(ctx)
		if err != nil || !st.Locked || st.TTL <= 0 || st.LastFencingToken < m.FencingToken() {
			t.Fatalf("Inspect %s = %+v, %v (token %d)", m.Name(), st, err, m.FencingToken())
		}
	}
	unlockAll(t, ctx, ms)
	pipe = admin.Pipeline()
	exists := make([]*redis.IntCmd, len(ms))
	for i, m := range ms {
		exists[i] = pipe.Exists(ctx, m.Name())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range exists {
		if c.Val() != 0 {
			t.Fatalf("%s still exists after Unlock", ms[i].Name())
		}
	}
	for _, m := range ms[len(ms)-len(tagged):] {
		if locked, err := m.IsLocked(ctx); err != nil || locked {
			t.Fatalf("IsLocked %s after Unlock = %v, %v", m.Name(), locked, err)
		}
	}

	// The next holder, on another Client, gets a larger token for every name.
	ms2 := make([]*dlock.Mutex, len(names))
	for i, n := range names {
		ms2[i] = b.NewMutex(n)
	}
	lockAll(t, ctx, ms2)
	for i, m := range ms2 {
		if m.FencingToken() <= first[i] {
			t.Fatalf("%s: token %d after %d", m.Name(), m.FencingToken(), first[i])
		}
	}
	// ForceUnlock by another Client on the tagged names: the holder learns of
	// it at its next renewal.
	for _, m := range ms2[len(ms2)-len(tagged):] {
		ok, err := a.NewMutex(m.Name()).ForceUnlock(ctx)
		if err != nil || !ok {
			t.Fatalf("ForceUnlock %s = %v, %v", m.Name(), ok, err)
		}
	}
	for _, m := range ms2[len(ms2)-len(tagged):] {
		if !closedWithin(m.Done(), clusterLease) || !errors.Is(m.Err(), dlock.ErrLockLost) {
			t.Fatalf("%s after ForceUnlock: Err = %v", m.Name(), m.Err())
		}
	}
	unlockAll(t, ctx, ms2[:len(ms2)-len(tagged)])
}

// lockAll locks every mutex, 16 at a time.
func lockAll(t *testing.T, ctx context.Context, ms []*dlock.Mutex) {
	t.Helper()
	forAll(t, ms, func(m *dlock.Mutex) error { return m.Lock(ctx) })
}

// unlockAll unlocks every mutex, 16 at a time.
func unlockAll(t *testing.T, ctx context.Context, ms []*dlock.Mutex) {
	t.Helper()
	forAll(t, ms, func(m *dlock.Mutex) error { return m.Unlock(ctx) })
}

func forAll(t *testing.T, ms []*dlock.Mutex, f func(*dlock.Mutex) error) {
	t.Helper()
	work := make(chan *dlock.Mutex)
	errs := make(chan error, len(ms))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				if err := f(m); err != nil {
					errs <- fmt.Errorf("%s: %w", m.Name(), err)
				}
			}
		}()
	}
	for _, m := range ms {
		work <- m
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := errors.Join(collectErrs(errs)...); err != nil {
		t.Fatal(err)
	}
}

// pubsubConnsOn counts the pub/sub connections of the node at addr.
func pubsubConnsOn(t testing.TB, cl *testserver.Cluster, addr string) int {
	t.Helper()
	list, err := cl.AdminAt(addr).Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatalf("CLIENT LIST TYPE pubsub on %s: %v", addr, err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if line != "" {
			n++
		}
	}
	return n
}

// subscribersOn returns how many connections of the node at addr subscribe
// to the sharded channel ch.
func subscribersOn(cl *testserver.Cluster, addr, ch string) int64 {
	return cl.AdminAt(addr).PubSubShardNumSub(context.Background(), ch).Val()[ch]
}

// A waiter is woken by the release notice, sent by SPUBLISH to the lock's
// slot and received through SSUBSCRIBE on that slot's primary, within
// milliseconds, far below its backoff step (10s) and the holder's lease
// (30s). Waiters on names of all three primaries share one subscription
// connection per primary, not one per waiter or per name, and all of them
// acquire in turn on notices alone.
func TestClusterWaiterWokenByShardedNotice(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	opts := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	holderC := newClient(t, cl.Client(), opts...)
	waiterC := newClient(t, cl.Client(), opts...)
	ps := cl.Primaries()

	// Wake-up latency, on a name of each primary.
	var worst time.Duration
	for _, p := range ps {
		name := namesOn(t, ps, p.Addr, "cluster:wake", 1)[0]
		ch := noticeChannel(name)
		for round := range 3 {
			holder := holderC.NewMutex(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			waiter := waiterC.NewMutex(name)
			got := make(chan time.Time, 1)
			go func() {
				if err := waiter.Lock(ctx); err != nil {
					t.Error(err)
				}
				got <- time.Now()
			}()
			testserver.WaitFor(t, 5*time.Second, "the waiter's sharded subscription on "+p.Addr, func() bool {
				return subscribersOn(cl, p.Addr, ch) > 0
			})
			released := time.Now()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-got:
				d := at.Sub(released)
				worst = max(worst, d)
				t.Logf("primary %s, round %d: waiter acquired %v after the release", p.Addr, round, d)
			case <-time.After(5 * time.Second):
				t.Fatalf("waiter on %s not woken by the release notice within 5s", p.Addr)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if worst > 100*time.Millisecond {
		t.Fatalf("slowest wake-up %v: notices should wake a waiter in milliseconds", worst)
	}

	// 3 waiters on each of 4 names per primary: one subscription connection
	// per primary for the waiting Client, none on the replicas.
	var holders []*dlock.Mutex
	var channels = map[string][]string{} // primary -> channels
	for _, p := range ps {
		for _, name := range namesOn(t, ps, p.Addr, "cluster:share", 4) {
			m := holderC.NewMutex(name)
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			holders = append(holders, m)
			channels[p.Addr] = append(channels[p.Addr], noticeChannel(name))
		}
	}
	var acquired atomic.Int32
	var wg sync.WaitGroup
	for _, h := range holders {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := waiterC.WithLock(ctx, h.Name(), func(context.Context, int64) error {
					acquired.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
	}
	for addr, chs := range channels {
		testserver.WaitFor(t, 10*time.Second, "every name's channel subscribed on "+addr, func() bool {
			for _, ch := range chs {
				if subscribersOn(cl, addr, ch) == 0 {
					return false
				}
			}
			return true
		})
	}
	for _, n := range cl.Nodes() {
		want := 0
		if n.Primary {
			want = 1
		}
		if got := pubsubConnsOn(t, cl, n.Addr); got != want {
			t.Fatalf("%d pub/sub connections on %s (primary %v) for %d waiters, want %d", got, n.Addr, n.Primary, 3*len(holders), want)
		}
	}
	start := time.Now()
	for _, m := range holders {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	t.Logf("%d waiters acquired in turn in %v", acquired.Load(), time.Since(start))
	if acquired.Load() != int32(3*len(holders)) {
		t.Fatalf("%d of %d waiters acquired", acquired.Load(), 3*len(holders))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("hand-offs took %v: a waiter waited for its backoff instead of a notice", d)
	}
}

// A slot is moved to another primary by hand (live resharding) while a lock
// in it is held: renewals keep working, by the ASK redirection while the
// slot is half-moved and by MOVED after it, so the hold is never lost; the
// key ends on the new primary with our token and a fresh TTL; Unlock after
// the move works. A waiter on the name was subscribed on the old primary,
// which drops the sharded subscription when the slot leaves it: the waiter
// subscribes again on the new primary and is woken there by the release
// notice, in milliseconds, not by its backoff (10s) or the holder's PTTL
// (at least 0.7s when it last looked).
func TestClusterSlotMigrationKeepsHold(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	c := newClient(t, cl.Client(), clusterOpts()...)
	waiterC := newClient(t, cl.Client(), clusterOpts(slowBackOff())...)
	const name = "cluster:migrate"
	s := slot.Of(name)
	from := cl.PrimaryFor(s)
	var to testserver.ClusterNode
	for _, p := range cl.Primaries() {
		if p.Addr != from.Addr {
			to = p
			break
		}
	}
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token, err := cl.AdminAt(from.Addr).Get(ctx, name).Result()
	if err != nil {
		t.Fatal(err)
	}
	waiter := waiterC.NewMutex(name)
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	testserver.WaitFor(t, 5*time.Second, "the waiter's subscription", func() bool {
		return subscribersOn(cl, from.Addr, noticeChannel(name)) > 0
	})
	renewed := func(what string, n uint64) {
		t.Helper()
		s0 := c.Stats()
		testserver.WaitFor(t, 3*clusterLease, fmt.Sprintf("%d renewals %s", n, what), func() bool {
			return c.Stats().Renewals >= s0.Renewals+n
		})
		if !m.IsHeld() {
			t.Fatalf("hold lost %s: %v", what, m.Err())
		}
	}

	mig := cl.BeginMigration(s, to.Addr)
	renewed("with the slot migrating, the key still on the source", 3)
	if moved := mig.MoveKeys(0); moved < 2 { // the lock and its slot's fencing counter
		t.Fatalf("moved %d keys, want the lock and the fencing counter", moved)
	}
	if n := cl.AdminAt(from.Addr).Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the key is still on the source")
	}
	renewed("with the slot half-moved (ASK to the target)", 3)
	if d := pttlOn(t, cl, to.Addr, name); d < clusterLease-2*clusterRenew {
		t.Fatalf("PTTL on the target %v while half-moved: renewals do not reach it", d)
	}
	mig.Finish()
	testserver.WaitFor(t, 5*time.Second, "the waiter's subscription on the new primary", func() bool {
		return subscribersOn(cl, to.Addr, noticeChannel(name)) > 0
	})
	if n := subscribersOn(cl, from.Addr, noticeChannel(name)); n != 0 {
		t.Fatalf("%d subscribers left on the old primary", n)
	}
	renewed("after the move (MOVED)", 3)
	if v := cl.AdminAt(to.Addr).Get(ctx, name).Val(); v != token {
		t.Fatalf("the new primary holds %q, not our token %q", v, token)
	}
	if d := pttlOn(t, cl, to.Addr, name); d < clusterLease-2*clusterRenew {
		t.Fatalf("PTTL on the new primary %v: renewals do not reach it", d)
	}
	if st := c.Stats(); st.Losses != 0 {
		t.Fatalf("%d losses", st.Losses)
	}
	before := m.FencingToken()
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the move: %v", err)
	}
	released := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(clusterLease + time.Second):
		t.Fatalf("waiter did not acquire within a lease of the release")
	}
	woke := time.Since(released)
	t.Logf("waiter acquired %v after the release", woke)
	if woke > 500*time.Millisecond {
		t.Fatalf("waiter acquired %v after the release: not woken by the notice on the new primary", woke)
	}
	if waiter.FencingToken() <= before {
		t.Fatalf("waiter's token %d not above %d", waiter.FencingToken(), before)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Unlock, ForceUnlock and Inspect while the lock's slot is half-moved (a
// migration in progress, as redis-cli --cluster reshard leaves a slot for as
// long as it takes to move its keys): each is a script on the lock's own
// slot, and a lock held by one key that is entirely on one node can be
// released there, before and after its keys have moved.
func TestClusterReleaseDuringSlotMigration(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	c := newClient(t, cl.Client(), clusterOpts()...)
	names := []string{"{mig}:a", "{mig}:b", "{mig}:c", "{mig}:d"}
	s := slot.Of(names[0])
	from := cl.PrimaryFor(s)
	var to testserver.ClusterNode
	for _, p := range cl.Primaries() {
		if p.Addr != from.Addr {
			to = p
			break
		}
	}
	ms := make([]*dlock.Mutex, len(names))
	for i, n := range names {
		ms[i] = c.NewMutex(n)
		if err := ms[i].Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mig := cl.BeginMigration(s, to.Addr)
	defer mig.Finish()
	// Every key still on the source.
	if st, err := ms[0].Inspect(ctx); err != nil || !st.Locked {
		t.Errorf("Inspect while migrating, key on the source = %+v, %v", st, err)
	}
	if err := ms[0].Unlock(ctx); err != nil {
		t.Errorf("Unlock while migrating, key on the source: %v", err)
	}
	if ok, err := c.NewMutex(names[1]).ForceUnlock(ctx); err != nil || !ok {
		t.Errorf("ForceUnlock while migrating, key on the source = %v, %v", ok, err)
	}
	// Every key on the target: ASK.
	mig.MoveKeys(0)
	if st, err := ms[2].Inspect(ctx); err != nil || !st.Locked {
		t.Errorf("Inspect while migrating, key on the target = %+v, %v", st, err)
	}
	if err := ms[2].Unlock(ctx); err != nil {
		t.Errorf("Unlock while migrating, key on the target: %v", err)
	}
	if !ms[3].IsHeld() {
		t.Fatalf("%s lost while half-moved: %v", names[3], ms[3].Err())
	}
	mig.Finish()
	for _, n := range names[:3] {
		if v, err := cl.AdminAt(to.Addr).Exists(ctx, n).Result(); err != nil || v != 0 {
			t.Errorf("%s still on the new primary after its release: %d, %v", n, v, err)
		}
	}
	if err := ms[3].Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the move: %v", err)
	}
}

// CLUSTER FAILOVER on the replica of the primary that holds a lock: the
// replica takes over without losing a write, renewals continue on it, the
// hold survives, and fencing tokens keep increasing.
func TestClusterFailoverKeepsHold(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	c := newClient(t, cl.Client(), clusterOpts()...)
	const name = "cluster:failover"
	p := cl.PrimaryFor(slot.Of(name))
	r := cl.ReplicaOf(p.Addr)
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.FencingToken()
	token := cl.AdminAt(p.Addr).Get(ctx, name).Val()
	s0 := c.Stats()
	testserver.WaitFor(t, 3*clusterLease, "2 renewals on the old primary", func() bool {
		return c.Stats().Renewals >= s0.Renewals+2
	})

	start := time.Now()
	cl.Failover(r.Addr)
	t.Logf("failover done in %v", time.Since(start))
	s0 = c.Stats()
	testserver.WaitFor(t, 3*clusterLease, "3 renewals on the promoted replica", func() bool {
		return c.Stats().Renewals >= s0.Renewals+3
	})
	if !m.IsHeld() {
		t.Fatalf("hold lost across the failover: %v", m.Err())
	}
	if cl.PrimaryFor(slot.Of(name)).Addr != r.Addr {
		t.Fatal("the replica does not serve the lock's slot")
	}
	if v := cl.AdminAt(r.Addr).Get(ctx, name).Val(); v != token {
		t.Fatalf("the promoted replica holds %q, not our token", v)
	}
	if d := pttlOn(t, cl, r.Addr, name); d < clusterLease-2*clusterRenew {
		t.Fatalf("PTTL on the promoted replica %v: renewals do not reach it", d)
	}
	if st := c.Stats(); st.Losses != 0 {
		t.Fatalf("%d losses", st.Losses)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on the promoted replica: %v", err)
	}
	m2 := c.NewMutex(name)
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m2.FencingToken() <= before {
		t.Fatalf("token after the failover %d not above %d", m2.FencingToken(), before)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A primary is killed: the cluster promotes its replica only after the node
// timeout (2s), longer than the lease (1s), so a hold on that primary is
// reported lost at its deadline (never held unconfirmed). Once the replica is
// promoted, locking works again on every primary, with larger tokens.
func TestClusterPrimaryKilledLosesShortHold(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	rdb := cl.Client(func(o *redis.ClusterOptions) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	})
	c := newClient(t, rdb, clusterOpts()...)
	const name = "cluster:killed"
	p := cl.PrimaryFor(slot.Of(name))
	r := cl.ReplicaOf(p.Addr)
	m := c.NewMutex(name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.FencingToken()
	// The grant reached the replica before the kill.
	if n, err := cl.AdminAt(p.Addr).Wait(ctx, 1, 2000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	cl.Kill(p.Addr)
	killed := time.Now()
	if !closedWithin(m.Done(), clusterLease+time.Second) {
		t.Fatal("loss not signalled while the primary was down")
	}
	if d := time.Since(killed); d > clusterLease+300*time.Millisecond {
		t.Fatalf("loss signalled %v after the kill, later than the lease (%v) allows", d, clusterLease)
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) || m.IsHeld() {
		t.Fatalf("Err = %v, IsHeld = %v", m.Err(), m.IsHeld())
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss = %v", err)
	}

	cl.WaitHealthy(30 * time.Second)
	t.Logf("replica %s promoted, cluster healthy %v after the kill", r.Addr, time.Since(killed))
	if cl.PrimaryFor(slot.Of(name)).Addr != r.Addr {
		t.Fatal("the replica does not serve the lock's slot")
	}
	m2 := c.NewMutex(name)
	if ok, err := m2.TryLock(ctx, 5*time.Second); !ok || err != nil {
		t.Fatalf("TryLock after the failover = %v, %v", ok, err)
	}
	if m2.FencingToken() <= before {
		t.Fatalf("token after the failover %d not above %d", m2.FencingToken(), before)
	}
	ps := cl.Primaries()
	var ms []*dlock.Mutex
	for _, q := range ps {
		for _, n := range namesOn(t, ps, q.Addr, "cluster:after", 5) {
			ms = append(ms, c.NewMutex(n))
		}
	}
	lockAll(t, ctx, ms)
	unlockAll(t, ctx, ms)
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// WithReplicaAck on a cluster: each primary's scripts are followed by WAIT on
// that primary, so locks on all three primaries are acquired and renewed with
// their replica's acknowledgement. With one replica killed, a lock whose slot
// its primary serves is refused with ErrNotReplicated naming the counts, and
// nothing is left behind on that primary; locks elsewhere still work.
func TestClusterReplicaAck(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	c := newClient(t, cl.Client(), clusterOpts(dlock.WithReplicaAck(1, 2*time.Second))...)
	ps := cl.Primaries()
	var ms []*dlock.Mutex
	for _, p := range ps {
		for _, n := range namesOn(t, ps, p.Addr, "cluster:ack", 3) {
			ms = append(ms, c.NewMutex(n))
		}
	}
	// A generous WAIT timeout: a loaded machine delays acknowledgements, and
	// a short count fails the grant (the point of the second part).
	lockAll(t, ctx, ms)
	s0 := c.Stats()
	testserver.WaitFor(t, 5*clusterLease, "every lock renewed twice, acknowledged", func() bool {
		return c.Stats().Renewals >= s0.Renewals+2*uint64(len(ms))
	})
	for _, m := range ms {
		if !m.IsHeld() {
			t.Fatalf("%s lost: %v", m.Name(), m.Err())
		}
	}
	unlockAll(t, ctx, ms)

	victim := ps[0]
	cl.Kill(cl.ReplicaOf(victim.Addr).Addr)
	name := namesOn(t, ps, victim.Addr, "cluster:ack:short", 1)[0]
	m := c.NewMutex(name)
	err := m.Lock(ctx)
	if !errors.Is(err, dlock.ErrNotReplicated) || !strings.Contains(err.Error(), "0 of 1") {
		t.Fatalf("Lock with the primary's replica dead = %v, want ErrNotReplicated naming 0 of 1", err)
	}
	if n := cl.AdminAt(victim.Addr).Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the refused grant was left on the primary")
	}
	other := c.NewMutex(namesOn(t, ps, ps[1].Addr, "cluster:ack:ok", 1)[0])
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("Lock on a primary with its replica: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// WithRedissonCompat on a cluster: the lock hash, its fencing counter
// redisson_lock_token:{name} and its channel redisson_lock__channel:{name}
// share the name's slot, so every script runs on one node and the release
// is announced by SPUBLISH there: a waiter on each primary (10s backoff) is
// woken by it in well under a second, and a sharded subscriber of Redisson's
// channel (a Java client in sharded mode) receives "0".
func TestClusterRedissonCompat(t *testing.T) {
	cl := testserver.StartCluster(t)
	ctx := ctxT(t)
	opts := clusterOpts(slowBackOff(), dlock.WithWatchdogTimeout(30*time.Second), dlock.WithRenewInterval(10*time.Second))
	holderC := newClient(t, cl.Client(), append(opts, dlock.WithRedissonCompat(uuid.NewString()))...)
	waiterC := newClient(t, cl.Client(), append(opts, dlock.WithRedissonCompat(uuid.NewString()))...)
	ps := cl.Primaries()
	for _, p := range ps {
		for _, name := range []string{namesOn(t, ps, p.Addr, "cluster:redisson", 1)[0], "{" + namesOn(t, ps, p.Addr, "cluster:tagged", 1)[0] + "}:x"} {
			if primaryOf(t, ps, slot.Of(name)) != p.Addr {
				continue // the tagged variant may land elsewhere
			}
			ch := "redisson_lock__channel:{" + name + "}"
			if strings.Contains(name, "{") {
				ch = "redisson_lock__channel:" + name
			}
			holder := holderC.NewMutex(name)
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if typ := cl.AdminAt(p.Addr).Type(ctx, name).Val(); typ != "hash" {
				t.Fatalf("%s on %s: TYPE %s", name, p.Addr, typ)
			}
			sub := cl.Admin().SSubscribe(ctx, ch)
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			waiter := waiterC.NewMutex(name)
			got := make(chan error, 1)
			go func() { got <- waiter.Lock(ctx) }()
			testserver.WaitFor(t, 5*time.Second, "the waiter's sharded subscription to "+ch, func() bool {
				return subscribersOn(cl, p.Addr, ch) >= 2
			})
			released := time.Now()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("waiter on %s not woken by the sharded release", name)
			}
			if d := time.Since(released); d > 500*time.Millisecond {
				t.Fatalf("waiter on %s took %v", name, d)
			}
			if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "0" {
				t.Fatalf("sharded subscriber got %v, %v", msg, err)
			}
			_ = sub.Close()
			if waiter.FencingToken() <= holder.FencingToken() {
				t.Fatalf("tokens %d then %d", holder.FencingToken(), waiter.FencingToken())
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}
