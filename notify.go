package dlock

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// noticeChannel returns the channel on which releases of name are announced:
// dlock:notice:{T}, one per hash slot (T is the slot's fencing tag), so it
// lives in the lock's own slot and the number of channels stays bounded. The
// message is the lock's name, so one channel serves every name of its slot.
func noticeChannel(name string) string {
	return "dlock:notice:" + fenceKey(name)[len(fencePrefix):]
}

// The notifier shares subscription connections among every waiter of a
// Client: one connection per Redis server (per primary on a cluster, with
// sharded pub/sub), reference-counted per channel, so waiting never costs a
// connection per waiter or per name. A notice wakes one local waiter of its
// name. Notices are hints: a waiter's sleep stays capped by the holder's PTTL
// and the backoff, so a lost notice costs at most that sleep.
type notifier struct {
	c *Client

	linger time.Duration // how long an unused channel stays subscribed

	mu       sync.Mutex
	conns    map[string]*subConn // by server address ("" for a single server)
	closed   bool
	degraded time.Time // until then, joins return at once: subscribing failed
	wg       sync.WaitGroup
}

// subConn is one subscription connection and the channels it carries.
type subConn struct {
	ps      *redis.PubSub
	chans   map[string]*subChan
	started bool // its dispatcher runs (started after the first subscribe,
	// so that a cluster connection goes to the node of its first channel)
}

// subChan is one subscribed channel.
type subChan struct {
	refs      int
	confirmed bool
	failed    error         // the server refused the subscription
	ready     chan struct{} // closed when the server first confirms, or refuses
	idleSince time.Time     // when refs dropped to 0
	names     map[string]*waitList
	solo      string // the one name of a name's own channel (joinOn), or ""

}

// waitList is the local waiters of one name, in arrival order.
type waitList struct{ ws []*waiter }

// A waiter is one Lock call waiting for a notice.
type waiter struct {
	ch      chan struct{} // receives a wake-up; capacity 1
	name    string
	id      string // set: woken only by notices addressed to it (joinID)
	channel string
	conn    *subConn
	gone    bool // the server dropped the channel; guarded by notifier.mu
}

const (
	// subscribeTimeout bounds how long a waiter waits for the server to
	// confirm a subscription before it waits by backoff alone.
	subscribeTimeout = time.Second
	// degradedFor is how long the Client waits by backoff alone after a
	// subscription was not confirmed (pub/sub refused, server unreachable).
	degradedFor = 10 * time.Second
	// subscriptionLinger keeps an unused channel subscribed for a while, so
	// that a busy name does not subscribe and unsubscribe on every wait.
	subscriptionLinger = 5 * time.Second
)

func newNotifier(c *Client) *notifier {
	return &notifier{c: c, linger: subscriptionLinger, conns: map[string]*subConn{}}
}

// join registers a waiter for name and makes sure its channel is subscribed
// and confirmed by the server, so that any release after join returns is
// announced to it. It returns nil when notices are off, the Client is closing,
// or the subscription could not be confirmed within the time left: the caller
// then waits by backoff alone.
func (n *notifier) join(ctx context.Context, name string, left time.Duration) *waiter {
	return n.joinID(ctx, name, "", left)
}

// joinID is join for a waiter that notices can address by id alone: a
// notice "<name>\n<id>" wakes it and no other (the fair lock's next in line).
func (n *notifier) joinID(ctx context.Context, name, id string, left time.Duration) *waiter {
	return n.joinOn(ctx, noticeChannel(name), name, id, left)
}

// joinOn is joinID on a channel of the caller's choosing. A channel other
// than the name's slot channel is the name's own (Redisson's layout,
// "redisson_lock__channel:{name}"): any message on it wakes the name's
// waiters, whatever it says.
func (n *notifier) joinOn(ctx context.Context, channel, name, id string, left time.Duration) *waiter {
	// A cluster node answers MOVED when the slot has left it and the client's
	// slot map is stale: try again once the map names another node.
	for range 3 {
		w, moved := n.joinOnce(ctx, channel, name, id, left)
		if moved == "" || !n.awaitMove(ctx, channel, moved, min(left, subscribeTimeout)) {
			return w
		}
	}
	return nil
}

// awaitMove has a Cluster client reload its slot map and waits, up to d,
// until the map no longer gives channel's slot to the node at old.
func (n *notifier) awaitMove(ctx context.Context, channel, old string, d time.Duration) bool {
	cc, ok := n.c.rdb.(*redis.ClusterClient)
	if !ok {
		return false
	}
	cc.ReloadState(ctx)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if addr, err := n.addrFor(ctx, channel); err == nil && addr != old {
			return true
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return false
}

// joinOnce is one try of join. When the node refused the subscription with
// MOVED it returns that node's address and no waiter.
func (n *notifier) joinOnce(ctx context.Context, channel, name, id string, left time.Duration) (_ *waiter, moved string) {
	addr, err := n.addrFor(ctx, channel) // I/O on a cluster: before taking mu
	n.mu.Lock()
	if n.closed || time.Now().Before(n.degraded) {
		n.mu.Unlock()
		return nil, ""
	}
	if err != nil {
		n.degrade(err)
		n.mu.Unlock()
		return nil, ""
	}
	sc := n.connFor(ctx, addr)
	ch := sc.chans[channel]
	subscribe := ch == nil
	if subscribe {
		ch = &subChan{ready: make(chan struct{}), names: map[string]*waitList{}}
		if channel != noticeChannel(name) {
			ch.solo = name
		}
		sc.chans[channel] = ch
	}
	w := ch.add(sc, channel, name, id)
	ready := ch.ready
	n.mu.Unlock()

	if subscribe {
		err := n.subscribe(ctx, sc, channel)
		n.mu.Lock()
		if err != nil {
			if sc.chans[channel] == ch {
				delete(sc.chans, channel) // the next waiter tries again
			}
			n.degrade(err)
		} else if !sc.started && !n.closed {
			sc.started = true
			n.wg.Add(1)
			go n.dispatch(sc)
		}
		n.mu.Unlock()
		if err != nil {
			n.leave(w)
			return nil, ""
		}
	}
	t := time.NewTimer(min(left, subscribeTimeout))
	defer t.Stop()
	select {
	case <-ready:
		n.mu.Lock()
		failed := ch.failed
		if failed != nil && !isMoved(failed) {
			n.degrade(failed)
		}
		n.mu.Unlock()
		if failed == nil {
			return w, ""
		}
		if isMoved(failed) {
			n.leave(w)
			return nil, addr
		}
	case <-t.C:
		if left >= subscribeTimeout {
			n.mu.Lock()
			n.degrade(errors.New("the server did not confirm the subscription within " + subscribeTimeout.String()))
			n.mu.Unlock()
		}
	case <-ctx.Done():
	case <-n.c.closing:
	}
	n.leave(w)
	return nil, ""
}

// isMoved reports a MOVED redirection: the slot is served by another node.
func isMoved(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "MOVED ")
}

// joinIfReady registers a waiter for name only if its channel is subscribed
// and confirmed already (a contended slot): it costs no I/O, so a Lock call
// can do it before its first attempt and then needs no second one.
func (n *notifier) joinIfReady(name string) *waiter {
	return n.joinIfReadyOn(noticeChannel(name), name)
}

// joinIfReadyOn is joinIfReady on a channel of the caller's choosing (see
// joinOn).
func (n *notifier) joinIfReadyOn(channel, name string) *waiter {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.conns) != 1 {
		return nil // none yet, or a cluster: join finds the node
	}
	for _, sc := range n.conns {
		ch := sc.chans[channel]
		if ch == nil || !ch.confirmed {
			return nil
		}
		return ch.add(sc, channel, name, "")
	}
	return nil
}

// add registers a new waiter for name at the back of its line. Called with
// the notifier's mu held.
func (ch *subChan) add(sc *subConn, channel, name, id string) *waiter {
	ch.refs++
	wl := ch.names[name]
	if wl == nil {
		wl = &waitList{}
		ch.names[name] = wl
	}
	w := &waiter{ch: make(chan struct{}, 1), name: name, id: id, channel: channel, conn: sc}
	wl.ws = append(wl.ws, w)
	return w
}

// degrade makes joins return at once for a while. Called with mu held.
func (n *notifier) degrade(err error) {
	n.degraded = time.Now().Add(degradedFor)
	n.c.log.Warn("dlock: pub/sub unavailable, waiting by backoff alone for a while",
		"for", degradedFor, "error", err)
}

// addrFor returns the server whose subscription connection carries channel:
// "" for a single server, the primary of the channel's slot on a cluster.
func (n *notifier) addrFor(ctx context.Context, channel string) (string, error) {
	cc, ok := n.c.rdb.(*redis.ClusterClient)
	if !ok {
		return "", nil
	}
	node, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return "", err
	}
	return node.Options().Addr, nil
}

// connFor returns the subscription connection for the server at addr,
// creating it if needed. Called with mu held.
func (n *notifier) connFor(ctx context.Context, addr string) *subConn {
	if sc := n.conns[addr]; sc != nil {
		return sc
	}
	var ps *redis.PubSub
	if cc, ok := n.c.rdb.(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx) // connects to the node of its first channel
	} else {
		ps = n.c.rdb.Subscribe(ctx)
	}
	sc := &subConn{ps: ps, chans: map[string]*subChan{}}
	n.conns[addr] = sc
	return sc
}

func (n *notifier) subscribe(ctx context.Context, sc *subConn, channel string) error {
	if _, ok := n.c.rdb.(*redis.ClusterClient); ok {
		return sc.ps.SSubscribe(ctx, channel)
	}
	return sc.ps.Subscribe(ctx, channel)
}

// leave unregisters w. A wake-up it received but did not use passes on to
// the next waiter of its name.
func (n *notifier) leave(w *waiter) {
	if w == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := w.conn.chans[w.channel]
	if ch == nil || ch.names[w.name] == nil || !ch.names[w.name].has(w) {
		return
	}
	if wl := ch.names[w.name]; wl != nil {
		for i, x := range wl.ws {
			if x == w {
				wl.ws = append(wl.ws[:i], wl.ws[i+1:]...)
				break
			}
		}
		if len(w.ch) > 0 {
			wl.wakeOne()
		}
		if len(wl.ws) == 0 {
			delete(ch.names, w.name)
		}
	}
	if ch.refs--; ch.refs == 0 {
		ch.idleSince = time.Now()
	}
}

func (wl *waitList) has(w *waiter) bool {
	for _, x := range wl.ws {
		if x == w {
			return true
		}
	}
	return false
}

// wakeID wakes the waiter with id, if it waits here.
func (wl *waitList) wakeID(id string) {
	for _, w := range wl.ws {
		if w.id == id {
			select {
			case w.ch <- struct{}{}:
			default:
			}
			return
		}
	}
}

// poke wakes one local waiter of name, as a notice would: a synchronizer
// that finds room for more than itself (permits left, a read lock that
// other readers may share) passes the wake-up on without a round trip.
func (n *notifier) poke(name string) {
	n.pokeOn(noticeChannel(name), name)
}

// pokeOn is poke for waiters on a channel of the caller's choosing.
func (n *notifier) pokeOn(channel, name string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, sc := range n.conns {
		if ch := sc.chans[channel]; ch != nil {
			if wl := ch.names[name]; wl != nil {
				wl.wakeOne()
			}
		}
	}
}

// wakeOne wakes the first waiter that has no wake-up pending, and moves it to
// the back so the next notice goes to another. Addressed waiters (joinID)
// are skipped: only their own notices wake them.
func (wl *waitList) wakeOne() {
	for i, w := range wl.ws {
		if w.id != "" {
			continue
		}
		select {
		case w.ch <- struct{}{}:
			copy(wl.ws[i:], wl.ws[i+1:])
			wl.ws[len(wl.ws)-1] = w
			return
		default:
		}
	}
}

// dispatch reads one subscription connection until it is closed: it wakes
// waiters, checks the connection with a PING when it has been quiet for a
// while (go-redis reconnects and resubscribes after an error), and drops
// subscriptions that have been idle. It reads the connection itself rather
// than through go-redis's message channel, one goroutine hop less per notice.
func (n *notifier) dispatch(sc *subConn) {
	defer n.wg.Done()
	ctx := context.Background()
	lastSweep := time.Now()
	for {
		m, err := sc.ps.ReceiveTimeout(ctx, n.linger)
		switch {
		case err == nil:
			if ch := n.deliver(sc, m); ch != "" {
				n.forget(sc, ch)
			}
		case n.isClosed():
			return
		case isTimeout(err):
			_ = sc.ps.Ping(ctx) // the answer, or the error, comes to this loop
		case isRedisError(err):
			n.refused(sc, err) // NOPERM to a SUBSCRIBE, say: the connection itself is fine
		default:
			// The connection broke; the next receive reconnects. Do not spin
			// while the server is unreachable.
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-t.C:
			case <-n.c.closing:
			}
			t.Stop()
		}
		if time.Since(lastSweep) >= n.linger {
			lastSweep = time.Now()
			n.sweep(sc)
		}
	}
}

// refused fails the subscriptions the server has not confirmed yet: their
// waiters stop waiting for confirmation and the Client waits by backoff.
func (n *notifier) refused(sc *subConn, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, ch := range sc.chans {
		if !ch.confirmed && ch.failed == nil {
			ch.failed = err
			close(ch.ready)
			delete(sc.chans, name)
		}
	}
}

func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

func (n *notifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// deliver handles one message of sc's connection. It returns the channel
// that the server unsubscribed by itself, if any (see drop).
func (n *notifier) deliver(sc *subConn, m any) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch m := m.(type) {
	case *redis.Message:
		if ch := sc.chans[m.Channel]; ch != nil {
			name, id, addressed := strings.Cut(m.Payload, "\n")
			if ch.solo != "" && !addressed {
				name = ch.solo // the name's own channel: any message is for it
			}
			if wl := ch.names[name]; wl != nil {
				if addressed {
					wl.wakeID(id)
				} else {
					wl.wakeOne()
				}
			}
		}
	case *redis.Subscription:
		ch := sc.chans[m.Channel]
		if ch == nil {
			return ""
		}
		switch m.Kind {
		case "subscribe", "ssubscribe":
		case "sunsubscribe":
			// The channel is still ours and confirmed, so the server dropped
			// it: on a cluster, its slot has moved to another node. (One not
			// confirmed yet was subscribed again after a sweep dropped it,
			// and this is the answer to the sweep's SUNSUBSCRIBE.)
			if !ch.confirmed {
				return ""
			}
			n.drop(sc, m.Channel, ch)
			return m.Channel
		default:
			return ""
		}
		if !ch.confirmed {
			ch.confirmed = true
			close(ch.ready)
			return ""
		}
		// Subscribed again after a reconnect: notices may have been lost
		// meanwhile, so let one waiter of each name look again.
		for _, wl := range ch.names {
			wl.wakeOne()
		}
	}
	return ""
}

// drop forgets a channel that the server unsubscribed by itself: Redis does
// that to sharded subscribers when the channel's slot moves to another node,
// after which notices for it are published there. Every waiter on it is
// woken and marked gone: it looks at the lock once more and, if it must wait
// again, subscribes anew, on the slot's new node. Called with mu held.
func (n *notifier) drop(sc *subConn, channel string, ch *subChan) {
	delete(sc.chans, channel)
	for _, wl := range ch.names {
		for _, w := range wl.ws {
			w.gone = true
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// forget removes a channel that the server dropped from go-redis's own list,
// so that a reconnect does not subscribe it again on the old node, and has
// a Cluster client reload its slot map, which has changed.
func (n *notifier) forget(sc *subConn, channel string) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	_ = sc.ps.SUnsubscribe(ctx, channel)
	if cc, ok := n.c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// dropped reports whether the server dropped w's channel (see drop).
func (n *notifier) dropped(w *waiter) bool {
	if w == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return w.gone
}

// sweep unsubscribes channels that nobody has waited on for a while.
func (n *notifier) sweep(sc *subConn) {
	n.mu.Lock()
	var idle []string
	for name, ch := range sc.chans {
		if ch.refs == 0 && time.Since(ch.idleSince) >= n.linger {
			idle = append(idle, name)
			delete(sc.chans, name)
		}
	}
	n.mu.Unlock()
	if len(idle) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	if _, ok := n.c.rdb.(*redis.ClusterClient); ok {
		_ = sc.ps.SUnsubscribe(ctx, idle...)
	} else {
		_ = sc.ps.Unsubscribe(ctx, idle...)
	}
}

// close ends every subscription connection and waits for their dispatchers.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	conns := n.conns
	n.conns = map[string]*subConn{}
	n.mu.Unlock()
	for _, sc := range conns {
		_ = sc.ps.Close()
	}
	n.wg.Wait()
}
