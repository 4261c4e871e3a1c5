// Package dlockotel instruments a dlock Client with OpenTelemetry metrics and
// traces. It is its own module, so the dlock library stays free of
// OpenTelemetry.
//
//	obs, err := dlockotel.New() // the global MeterProvider and TracerProvider
//	client, err := dlock.New(rdb, dlock.WithObserver(obs))
//
// Metrics (instrumentation scope github.com/dlock-go/dlock/dlockotel):
//
//	dlock.lock.acquisitions   counter       Lock and TryLock calls, by dlock.outcome
//	dlock.lock.wait           histogram, s  time from the call to its return, by dlock.outcome
//	dlock.lock.hold           histogram, s  time from the grant to the end, by dlock.ending
//	dlock.lock.unlocks        counter       Unlock calls, by dlock.outcome
//	dlock.lock.losses         counter       holds that ended as lost
//	dlock.locks.held          updowncounter holds live now
//	dlock.renewals            counter       renewals Redis confirmed
//	dlock.renewal.failures    counter       renewals that did not reach Redis or were refused
//	dlock.renewal.pass        histogram, s  wall time of a watchdog pass
//
// Spans: "dlock.Lock" and "dlock.Unlock" for each call, with the lock's name
// (dlock.lock.name), the outcome and, once acquired, the fencing token. Lock
// names are not metric attributes unless WithNameAttribute is given: names are
// often unbounded (lock:order:<id>) and would explode a metrics backend.
package dlockotel

import (
	"context"

	"github.com/dlock-go/dlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/dlock-go/dlock/dlockotel"

// Observer is a dlock.Observer that records metrics and spans. Create it with
// New and pass it to dlock.WithObserver; it is safe for concurrent use and may
// serve several Clients.
type Observer struct {
	tracer    trace.Tracer
	withNames bool

	acquisitions metric.Int64Counter
	wait         metric.Float64Histogram
	hold         metric.Float64Histogram
	unlocks      metric.Int64Counter
	losses       metric.Int64Counter
	held         metric.Int64UpDownCounter
	renewals     metric.Int64Counter
	failures     metric.Int64Counter
	pass         metric.Float64Histogram
}

var _ dlock.Observer = (*Observer)(nil)

// An Option configures New.
type Option func(*options)

type options struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	withNames bool
}

// WithMeterProvider sets where metrics go; default (and with nil): the global
// MeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.mp = mp }
}

// WithTracerProvider sets where spans go; default (and with nil): the global
// TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tp = tp }
}

// WithNameAttribute adds the lock's name (dlock.lock.name) to metrics. Use it
// only when names are few and fixed; spans always carry the name.
func WithNameAttribute() Option {
	return func(o *options) { o.withNames = true }
}

// New returns an Observer recording to the given (or global) providers. It
// fails only if an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.mp == nil {
		o.mp = otel.GetMeterProvider()
	}
	if o.tp == nil {
		o.tp = otel.GetTracerProvider()
	}
	m := o.mp.Meter(ScopeName)
	obs := &Observer{tracer: o.tp.Tracer(ScopeName), withNames: o.withNames}
	var err error
	seconds := metric.WithUnit("s")
	latency := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
	if obs.acquisitions, err = m.Int64Counter("dlock.lock.acquisitions",
		metric.WithDescription("Lock and TryLock calls, by outcome")); err != nil {
		return nil, err
	}
	if obs.wait, err = m.Float64Histogram("dlock.lock.wait", seconds, latency,
		metric.WithDescription("Time from a Lock or TryLock call to its return")); err != nil {
		return nil, err
	}
	if obs.hold, err = m.Float64Histogram("dlock.lock.hold", seconds, latency,
		metric.WithDescription("Time from a grant to the end of the hold, by how it ended")); err != nil {
		return nil, err
	}
	if obs.unlocks, err = m.Int64Counter("dlock.lock.unlocks",
		metric.WithDescription("Unlock calls, by outcome")); err != nil {
		return nil, err
	}
	if obs.losses, err = m.Int64Counter("dlock.lock.losses",
		metric.WithDescription("Holds that ended because their lease could not be confirmed")); err != nil {
		return nil, err
	}
	if obs.held, err = m.Int64UpDownCounter("dlock.locks.held",
		metric.WithDescription("Holds live now")); err != nil {
		return nil, err
	}
	if obs.renewals, err = m.Int64Counter("dlock.renewals",
		metric.WithDescription("Lease renewals Redis confirmed")); err != nil {
		return nil, err
	}
	if obs.failures, err = m.Int64Counter("dlock.renewal.failures",
		metric.WithDescription("Lease renewals that did not reach Redis or that Redis refused")); err != nil {
		return nil, err
	}
	if obs.pass, err = m.Float64Histogram("dlock.renewal.pass", seconds, latency,
		metric.WithDescription("Wall time of one watchdog renewal pass")); err != nil {
		return nil, err
	}
	return obs, nil
}

// Attribute keys.
const (
	NameKey    = attribute.Key("dlock.lock.name")
	OutcomeKey = attribute.Key("dlock.outcome")
	EndingKey  = attribute.Key("dlock.ending")
	TokenKey   = attribute.Key("dlock.fencing_token")
)

func (o *Observer) attrs(name string, kv ...attribute.KeyValue) metric.MeasurementOption {
	if o.withNames {
		kv = append(kv, NameKey.String(name))
	}
	return metric.WithAttributes(kv...)
}

// LockStart starts a "dlock.Lock" span.
func (o *Observer) LockStart(ctx context.Context, name string) context.Context {
	ctx, _ = o.tracer.Start(ctx, "dlock.Lock", trace.WithAttributes(NameKey.String(name)))
	return ctx
}

// LockEnd records the call and ends its span.
func (o *Observer) LockEnd(ctx context.Context, e dlock.LockEvent) {
	at := o.attrs(e.Name, OutcomeKey.String(string(e.Outcome)))
	o.acquisitions.Add(ctx, 1, at)
	o.wait.Record(ctx, e.Wait.Seconds(), at)
	if e.Outcome == dlock.Acquired {
		o.held.Add(ctx, 1, o.attrs(e.Name))
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(OutcomeKey.String(string(e.Outcome)))
	if e.FencingToken != 0 {
		span.SetAttributes(TokenKey.Int64(e.FencingToken))
	}
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, string(e.Outcome))
	}
	span.End()
}

// UnlockStart starts a "dlock.Unlock" span.
func (o *Observer) UnlockStart(ctx context.Context, name string) context.Context {
	ctx, _ = o.tracer.Start(ctx, "dlock.Unlock", trace.WithAttributes(NameKey.String(name)))
	return ctx
}

// UnlockEnd records the call and ends its span.
func (o *Observer) UnlockEnd(ctx context.Context, e dlock.UnlockEvent) {
	o.unlocks.Add(ctx, 1, o.attrs(e.Name, OutcomeKey.String(string(e.Outcome))))
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(OutcomeKey.String(string(e.Outcome)))
	if e.Err != nil {
		span.RecordError(e.Err)
		if e.Outcome != dlock.NotHeld {
			span.SetStatus(codes.Error, string(e.Outcome))
		}
	}
	span.End()
}

// HoldEnd records the hold time, and a loss.
func (o *Observer) HoldEnd(e dlock.HoldEvent) {
	ctx := context.Background()
	o.hold.Record(ctx, e.Held.Seconds(), o.attrs(e.Name, EndingKey.String(string(e.Ending))))
	o.held.Add(ctx, -1, o.attrs(e.Name))
	if e.Ending == dlock.EndLost {
		o.losses.Add(ctx, 1, o.attrs(e.Name))
	}
}

// RenewalPass records renewals, failures and the pass time.
func (o *Observer) RenewalPass(e dlock.PassEvent) {
	ctx := context.Background()
	if e.Renewed > 0 {
		o.renewals.Add(ctx, int64(e.Renewed))
	}
	if e.Failed > 0 {
		o.failures.Add(ctx, int64(e.Failed))
	}
	o.pass.Record(ctx, e.Duration.Seconds())
}
