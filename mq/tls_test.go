package mq

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// writeTLSFiles writes a CA and a server certificate for 127.0.0.1 signed
// by it, and returns the paths of the CA, the certificate and its key.
func writeTLSFiles(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "echostore test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", srvDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// rediss:// connects with TLS, verifying the server against ca_file (or
// not, with skip_verify); a certificate from an unknown CA is refused.
func TestTLS(t *testing.T) {
	ca, cert, key := writeTLSFiles(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{Args: []string{
		"--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no"}})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := connect(t, "rediss://"+addr+"/0?ca_file="+ca, Options{})
	if _, err := c.Append(testCtx(t), mustRef(t, "q", "s"), fields("over", "tls")...); err != nil {
		t.Fatal(err)
	}
	connect(t, "rediss://"+addr+"?skip_verify=true", Options{})
	for _, url := range []string{"rediss://" + addr, "redis://" + addr + "?dial_timeout=1s&timeout=1s"} {
		if c, err := Connect(testCtx(t), Options{URL: url}); err == nil {
			c.Close()
			t.Errorf("%s: connected", url)
		}
	}
}
