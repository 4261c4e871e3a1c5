package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartRedisTLS starts a local redis-server that speaks TLS only (no plain
// port), with a certificate for 127.0.0.1 and localhost issued by a CA made
// for this test, and returns it with a client configuration that trusts that
// CA. Client and Admin connect over TLS with that configuration. Clients need
// no certificate of their own (--tls-auth-clients no). args are added to the
// command line, as with StartRedis. It needs redis-server on PATH (built with
// TLS, as Debian's is): without it the test skips, or fails under
// DLOCK_REQUIRE_REDIS=1.
func StartRedisTLS(tb testing.TB, args ...string) (*Redis, *tls.Config) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "TLS tests need redis-server on PATH (apt-get install redis-server)"
		if RequireRedis() {
			tb.Fatalf("DLOCK_REQUIRE_REDIS=1: %s", msg)
		}
		tb.Skip(msg)
	}
	dir := tb.TempDir()
	cfg, files, err := writeTLSFiles(dir)
	if err != nil {
		tb.Fatalf("testserver: TLS certificates: %v", err)
	}
	r := &Redis{tb: tb, bin: bin, dir: dir, args: args, admin: requirePass(args), tls: cfg,
		tlsArgs: []string{
			"--tls-cert-file", files.cert, "--tls-key-file", files.key,
			"--tls-ca-cert-file", files.ca, "--tls-auth-clients", "no",
		}}
	r.startFresh()
	return r, cfg.Clone()
}

type tlsFiles struct{ ca, cert, key string }

// writeTLSFiles makes a CA and a server certificate for 127.0.0.1, ::1 and
// localhost (ECDSA P-256, valid for a day), writes them as PEM files to dir,
// and returns a client configuration that trusts the CA.
func writeTLSFiles(dir string) (*tls.Config, tlsFiles, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, tlsFiles{}, err
	}
	f := tlsFiles{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "redis.crt"), key: filepath.Join(dir, "redis.key")}
	for _, w := range []struct {
		path, kind string
		der        []byte
		mode       os.FileMode
	}{
		{f.ca, "CERTIFICATE", caDER, 0o644},
		{f.cert, "CERTIFICATE", der, 0o644},
		{f.key, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), w.mode); err != nil {
			return nil, tlsFiles{}, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, f, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}
