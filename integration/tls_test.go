package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// dlock over TLS (a redis-server with only a TLS port, a CA made for the
// test; clients need no certificate of their own): locking, renewal with
// short leases, a waiter woken by a release notice (pub/sub over TLS),
// Unlock, and fencing tokens that keep increasing.
func TestLockOverTLS(t *testing.T) {
	srv, cfg := testserver.StartRedisTLS(t)
	admin := srv.Admin()
	ctx := ctxT(t)
	if rdb := srv.Client(); rdb.Options().TLSConfig == nil || cfg.RootCAs == nil {
		t.Fatal("the harness's client does not use TLS")
	}
	// A client that speaks plain RESP to the TLS port gets nowhere.
	plain := srv.Client(func(o *redis.Options) {
		o.TLSConfig = nil
		o.MaxRetries = -1
		o.DialTimeout, o.ReadTimeout = time.Second, time.Second
	})
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain-text client was answered on the TLS port")
	}

	// Renewal: a hold with 300ms leases renewed every 100ms outlives five leases.
	short := newClient(t, srv.Client())
	m := short.NewMutex("lock:tls:renew")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock over TLS: %v", err)
	}
	first := m.FencingToken()
	token := admin.Get(ctx, "lock:tls:renew").Val()
	minTTL := lease
	for start := time.Now(); time.Since(start) < 5*lease; {
		if !m.IsHeld() {
			t.Fatalf("hold over TLS ended after %v: %v", time.Since(start), m.Err())
		}
		if v := admin.Get(ctx, "lock:tls:renew").Val(); v != token {
			t.Fatalf("key holds %q, not our token", v)
		}
		minTTL = min(minTTL, admin.PTTL(ctx, "lock:tls:renew").Val())
		time.Sleep(10 * time.Millisecond) // sampling the TTL over time
	}
	if minTTL < lease-2*renew-50*time.Millisecond {
		t.Fatalf("TTL fell to %v: renewals over TLS fall behind", minTTL)
	}
	if s := short.Stats(); s.Renewals < 5 {
		t.Fatalf("%d renewals over five leases", s.Renewals)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock over TLS: %v", err)
	}

	// A waiter is woken by the release notice: with 30s leases and a 10s
	// backoff only the notice, delivered over the TLS subscription, can wake
	// it within milliseconds.
	long := []dlock.Option{dlock.WithWatchdogTimeout(30 * time.Second), dlock.WithRenewInterval(10 * time.Second), slowBackOff()}
	a := newClient(t, srv.Client(), long...)
	b := newClient(t, srv.Client(), long...)
	holder := a.NewMutex("lock:tls")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	second := holder.FencingToken()
	waiter := b.NewMutex("lock:tls")
	got := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	ch := noticeChannel("lock:tls")
	testserver.WaitFor(t, 5*time.Second, "the waiter's subscription over TLS", func() bool {
		return admin.PubSubNumSub(ctx, ch).Val()[ch] > 0
	})
	released := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		d := at.Sub(released)
		t.Logf("waiter acquired %v after the release", d)
		if d > time.Second {
			t.Fatalf("waiter acquired %v after the release: not woken by the notice", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release notice over TLS")
	}
	third := waiter.FencingToken()
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !(first < second && second < third) {
		t.Fatalf("fencing tokens %d, %d, %d do not increase", first, second, third)
	}
	if admin.Exists(ctx, "lock:tls").Val() != 0 {
		t.Fatal("lock still held after Unlock")
	}
}

// A client that does not trust the server's CA fails with the certificate
// error, promptly: go-redis at once, and dlock's TryLock when its wait ends.
func TestTLSWithoutTheCAFailsClearly(t *testing.T) {
	srv, _ := testserver.StartRedisTLS(t)
	ctx := ctxT(t)
	untrusting := srv.Client(func(o *redis.Options) {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // the system roots: not the test's CA
		o.MaxRetries = -1
	})
	isCertErr := func(err error) bool {
		var unknown x509.UnknownAuthorityError
		var verify *tls.CertificateVerificationError
		return errors.As(err, &unknown) && errors.As(err, &verify)
	}
	start := time.Now()
	err := untrusting.Ping(ctx).Err()
	if !isCertErr(err) {
		t.Fatalf("PING without the CA = %v, want a certificate verification error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("PING without the CA failed only after %v", took)
	}
	t.Logf("PING without the CA: %v", err)

	c := newClient(t, untrusting)
	start = time.Now()
	ok, err := c.NewMutex("lock:untrusted").TryLock(ctx, time.Second)
	took := time.Since(start)
	t.Logf("TryLock(1s) without the CA after %v: %v", took.Round(time.Millisecond), err)
	if ok || !isCertErr(err) {
		t.Fatalf("TryLock without the CA = %v, %v; want the certificate error", ok, err)
	}
	if took > 3*time.Second {
		t.Fatalf("TryLock(1s) without the CA returned after %v", took)
	}
	// Lock has no wait of its own, but an untrusted certificate is not
	// transient: it returns the certificate error at once, without waiting
	// for its context.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start = time.Now()
	err = c.NewMutex("lock:untrusted").Lock(lctx)
	if !isCertErr(err) || errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("Lock without the CA = %v after %v, want the certificate error at once", err, time.Since(start))
	}
}
