package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Pool starts shared servers for one test package on first use and stops
// them when the package's tests end. Its zero value is ready to use.
type Pool struct {
	mu      sync.Mutex
	redis   map[bool]*Redis // by AOF
	cluster *Cluster
	minio   *MinIO
	errs    map[string]error // a failed start is not retried
}

// Run runs the package's tests and then stops every server the Pool started.
// Use it from TestMain: os.Exit(servers.Run(m)).
func (p *Pool) Run(m *testing.M) int {
	code := m.Run()
	p.stopAll()
	return code
}

func (p *Pool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.redis {
		_ = r.Stop()
	}
	if p.cluster != nil {
		_ = p.cluster.Stop()
	}
	if p.minio != nil {
		_ = p.minio.Stop()
	}
	p.redis, p.cluster, p.minio = nil, nil, nil
}

func (p *Pool) failed(key string) error {
	if p.errs == nil {
		p.errs = map[string]error{}
	}
	return p.errs[key]
}

// Redis returns the package's plain redis-server, starting it on first use.
func (p *Pool) Redis(t testing.TB) *Redis { return p.redisServer(t, false) }

// RedisAOF returns the package's redis-server with AOF and appendfsync
// always, starting it on first use.
func (p *Pool) RedisAOF(t testing.TB) *Redis { return p.redisServer(t, true) }

func (p *Pool) redisServer(t testing.TB, aof bool) *Redis {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	key := fmt.Sprintf("redis-aof=%v", aof)
	if err := p.failed(key); err != nil {
		Unavailable(t, err)
	}
	if r := p.redis[aof]; r != nil {
		return r
	}
	r, err := StartRedis(context.Background(), RedisConfig{AOF: aof})
	if err != nil {
		p.errs[key] = err
		Unavailable(t, err)
	}
	if p.redis == nil {
		p.redis = map[bool]*Redis{}
	}
	p.redis[aof] = r
	return r
}

// Cluster returns the package's 3-master Redis Cluster, starting it on first
// use.
func (p *Pool) Cluster(t testing.TB) *Cluster {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failed("cluster"); err != nil {
		Unavailable(t, err)
	}
	if p.cluster != nil {
		return p.cluster
	}
	c, err := StartCluster(context.Background(), 3)
	if err != nil {
		p.errs["cluster"] = err
		Unavailable(t, err)
	}
	p.cluster = c
	return c
}

// MinIO returns the package's MinIO server, starting it on first use.
func (p *Pool) MinIO(t testing.TB) *MinIO {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failed("minio"); err != nil {
		Unavailable(t, err)
	}
	if p.minio != nil {
		return p.minio
	}
	m, err := StartMinIO(context.Background())
	if err != nil {
		p.errs["minio"] = err
		Unavailable(t, err)
	}
	p.minio = m
	return m
}

// Unavailable ends a test that cannot get a server it needs: a missing binary
// fails it when CI=true and skips it loudly otherwise; any other error fails
// it.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrMissing) && os.Getenv("CI") != "true" {
		msg := fmt.Sprintf("SKIPPED, SERVER MISSING: %v", err)
		fmt.Fprintln(os.Stderr, "*** "+msg)
		t.Skip(msg)
	}
	t.Fatalf("test server unavailable: %v", err)
}
