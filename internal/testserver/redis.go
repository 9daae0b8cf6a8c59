package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RedisConfig says how to start a redis-server.
type RedisConfig struct {
	// AOF turns on the append-only file with appendfsync always, so that a
	// restart keeps every acknowledged write.
	AOF bool
	// Cluster starts the server in cluster mode (used by StartCluster).
	Cluster bool
	// Port, if non-zero, is used instead of a free port.
	Port int
	// Dir, if set, is the working directory (kept across Restart).
	Dir string
	// Args are extra "--name value" arguments.
	Args []string
}

// Redis is a running private redis-server.
type Redis struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// URL is "redis://127.0.0.1:<port>/0".
	URL string
	// Port is the TCP port.
	Port int
	// Dir is the server's working directory (AOF and RDB files).
	Dir string

	cfg  RedisConfig
	bin  string
	mu   sync.Mutex
	proc *proc
	own  bool // Dir was made here and is removed by Stop
}

// RedisBinary returns the path of redis-server or an error wrapping
// ErrMissing with the command that installs it.
func RedisBinary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server: %w (install it: apt-get install -y redis-server)", ErrMissing)
	}
	return p, nil
}

// StartRedis starts a redis-server on a free loopback port and waits until
// it answers PING.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	r := &Redis{cfg: cfg, bin: bin, Dir: cfg.Dir}
	if r.Dir == "" {
		d, err := os.MkdirTemp("", "echostore-redis-")
		if err != nil {
			return nil, fmt.Errorf("redis dir: %w", err)
		}
		r.Dir, r.own = d, true
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := cfg.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		r.Port = port
		r.Addr = "127.0.0.1:" + strconv.Itoa(port)
		r.URL = "redis://" + r.Addr + "/0"
		if lastErr = r.start(ctx); lastErr == nil {
			return r, nil
		}
		if cfg.Port != 0 {
			break
		}
	}
	if r.own {
		os.RemoveAll(r.Dir)
	}
	return nil, lastErr
}

func (r *Redis) args() []string {
	a := []string{
		"--port", strconv.Itoa(r.Port),
		"--bind", "127.0.0.1",
		"--dir", r.Dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--maxmemory-policy", "noeviction",
		"--logfile", "",
	}
	if r.cfg.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if r.cfg.Cluster {
		a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
	}
	return append(a, r.cfg.Args...)
}

func (r *Redis) start(ctx context.Context) error {
	p, err := startProc(r.bin, r.args(), r.Dir, "redis.log", nil)
	if err != nil {
		return err
	}
	err = waitReady(ctx, p, "redis-server on "+r.Addr, func(ctx context.Context) error {
		out, err := Do(ctx, r.Addr, "PING")
		if err != nil {
			return err
		}
		if out != "PONG" {
			return fmt.Errorf("PING answered %q", out)
		}
		return nil
	})
	if err != nil {
		_ = p.stop(syscall.SIGKILL, 5*time.Second)
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return nil
}

// Kill ends the server with SIGKILL, as a crash would. With AOF and
// appendfsync always, every acknowledged write survives it.
func (r *Redis) Kill() error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop(syscall.SIGKILL, 10*time.Second)
}

// Restart starts the server again on the same port and directory after Kill
// or Stop(keepDir).
func (r *Redis) Restart(ctx context.Context) error {
	if err := r.Kill(); err != nil {
		return err
	}
	return r.start(ctx)
}

// Stop ends the server and removes its directory if StartRedis made it.
func (r *Redis) Stop() error {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	var err error
	if p != nil {
		err = p.stop(syscall.SIGTERM, 10*time.Second)
	}
	if r.own {
		os.RemoveAll(r.Dir)
	}
	return err
}

// Cluster is a running Redis Cluster of masters on loopback.
type Cluster struct {
	// Nodes are the masters.
	Nodes []*Redis
	// Addrs are the masters' "127.0.0.1:<port>" addresses.
	Addrs []string
}

// clusterPortMax is the highest port a cluster node may use: the cluster bus
// listens on port+10000, which must stay a valid port.
const clusterPortMax = 55535

// StartCluster starts n masters (n ≥ 3) with no replicas, joins them with
// redis-cli --cluster create, and waits until every node reports
// cluster_state:ok.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("a Redis Cluster needs at least 3 masters, got %d", n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli: %w (install it: apt-get install -y redis-tools)", ErrMissing)
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		port, err := clusterPort(c.Addrs)
		if err != nil {
			c.Stop()
			return nil, err
		}
		r, err := StartRedis(ctx, RedisConfig{Cluster: true, Port: port})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, r)
		c.Addrs = append(c.Addrs, r.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, r := range c.Nodes {
		err := waitReady(ctx, r.proc, "cluster node "+r.Addr, func(ctx context.Context) error {
			info, err := Do(ctx, r.Addr, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("cluster not ok yet")
			}
			return nil
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// clusterPort picks a free port in [20000, 55535] whose bus port is free too.
func clusterPort(taken []string) (int, error) {
	for attempt := 0; attempt < 200; attempt++ {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port > clusterPortMax {
			// Ephemeral ports are often above the limit: derive one below it.
			port = 20000 + port%(clusterPortMax-20000)
		}
		dup := false
		for _, a := range taken {
			if strings.HasSuffix(a, ":"+strconv.Itoa(port)) || strings.HasSuffix(a, ":"+strconv.Itoa(port+10000)) ||
				strings.HasSuffix(a, ":"+strconv.Itoa(port-10000)) {
				dup = true
			}
		}
		if !dup && portFree(port) && portFree(port+10000) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair (p, p+10000) with p ≤ %d", clusterPortMax)
}

// Stop stops every node.
func (c *Cluster) Stop() error {
	var first error
	for _, r := range c.Nodes {
		if err := r.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
