package testserver

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// RedisImage is the image used when Redis runs in a container.
const RedisImage = "redis:7.0"

// dockerAnswers reports whether a Docker engine answers a ping on its socket
// within a second (a docker CLI without an engine does not count).
func dockerAnswers() bool {
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil {
			return false
		}
		switch u.Scheme {
		case "unix":
			addr = u.Path
		case "tcp":
			network, addr = "tcp", u.Host
		default:
			return false
		}
	}
	conn, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.Contains(line, " 200 ")
}

// startContainer runs Redis in a container through testcontainers; such a
// server cannot be killed or paused by the tests (see RequireLocal).
func startContainer(tb testing.TB, args []string) *Redis {
	tb.Helper()
	ctx, cancel := ctxTimeout()
	defer cancel()
	opts := []testcontainers.ContainerCustomizer{}
	if len(args) > 0 {
		opts = append(opts, testcontainers.WithCmdArgs(args...))
	}
	c, err := tcredis.Run(ctx, RedisImage, opts...)
	testcontainers.CleanupContainer(tb, c)
	if err != nil {
		tb.Fatalf("testserver: redis container: %v", err)
	}
	uri, err := c.ConnectionString(ctx)
	if err != nil {
		tb.Fatalf("testserver: redis container address: %v", err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		tb.Fatalf("testserver: redis container address %q: %v", uri, err)
	}
	return &Redis{tb: tb, Addr: u.Host}
}
