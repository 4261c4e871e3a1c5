package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is used when neither --redis nor REDIS_URL is given.
const defaultRedisURL = "redis://127.0.0.1:6379"

// connect opens the Redis that raw names and checks that it answers:
//
//	redis://[user:pass@]host:port[/db] and rediss://... (TLS): one server
//	unix:///path/to/redis.sock: one server over a Unix socket
//	redis+cluster://host:port?addr=host2:port2&addr=...: a Redis Cluster
//	redis+sentinel://host:port?master_name=NAME&addr=...: Sentinel (failover)
//
// Query parameters set go-redis options (dial_timeout=3s, ...).
func connect(ctx context.Context, raw string) (redis.UniversalClient, error) {
	if raw == "" {
		raw = os.Getenv("REDIS_URL")
	}
	if raw == "" {
		raw = defaultRedisURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	var rdb redis.UniversalClient
	switch u.Scheme {
	case "redis", "rediss", "unix":
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		rdb = redis.NewClient(opt)
	case "redis+cluster", "rediss+cluster":
		opt, err := redis.ParseClusterURL(strings.Replace(raw, "+cluster", "", 1))
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		rdb = redis.NewClusterClient(opt)
	case "redis+sentinel", "rediss+sentinel":
		opt, err := redis.ParseFailoverURL(strings.Replace(raw, "+sentinel", "", 1))
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		rdb = redis.NewFailoverClient(opt)
	default:
		return nil, fmt.Errorf("redis URL %q: scheme %q: want redis, rediss, unix, redis+cluster or redis+sentinel", redact(u), u.Scheme)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", redact(u), err)
	}
	return rdb, nil
}

// redact returns u without its password, for messages.
func redact(u *url.URL) string { return u.Redacted() }
