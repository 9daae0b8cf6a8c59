package all

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
)

// env is the servers a run talks to.
type env struct {
	redisURL  string
	redisNote string // where the Redis came from
	raw       rueidis.Client
	queue     string // a queue name of this run (its keys are deleted at the end)
	remotes   []remoteSpec
	stop      []func()
	// stopMinIO stops the private MinIO once the sync suite is done (nil
	// while none runs).
	stopMinIO func()
	// archiveCache is the block cache of the archive suites' graft
	// stores (Config.ArchiveCacheSize).
	archiveCache int64
}

// remoteSpec is one remote of the sync suite.
type remoteSpec struct {
	Name string // "file", "minio", "s3"
	URL  string
	Note string
}

func startEnv(ctx context.Context, cfg Config, scratch string) (*env, error) {
	e := &env{queue: fmt.Sprintf("bench-%08x", rand.Uint32()), archiveCache: cfg.ArchiveCacheSize}
	if cfg.RedisURL != "" {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := mq.Connect(cctx, mq.Options{URL: cfg.RedisURL})
		cancel()
		if err == nil {
			c.Close()
			e.redisURL, e.redisNote = cfg.RedisURL, "the Redis at --redis"
		}
	}
	if e.redisURL == "" {
		r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
		if err != nil {
			return nil, fmt.Errorf("bench all: no Redis answers at --redis and a private redis-server could not start: %w", err)
		}
		e.stop = append(e.stop, func() { _ = r.Stop() })
		e.redisURL, e.redisNote = r.URL, "a private redis-server started for the run"
		if v, err := testserver.Do(ctx, r.Addr, "INFO", "server"); err == nil {
			if ver := infoField(v, "redis_version"); ver != "" {
				e.redisNote = "a private redis-server " + ver + " started for the run"
			}
		}
	}
	raw, err := rawClient(e.redisURL)
	if err != nil {
		e.close()
		return nil, err
	}
	e.raw = raw

	e.remotes = []remoteSpec{{Name: "file", URL: "file://" + filepath.ToSlash(filepath.Join(scratch, "remote")), Note: "a folder in the scratch directory (same disk)"}}
	switch {
	case cfg.S3URL != "":
		e.remotes = append(e.remotes, remoteSpec{Name: "s3", URL: cfg.S3URL, Note: "--s3"})
	case !cfg.NoMinIO:
		if _, err := testserver.MinIOBinary(); err != nil {
			break
		}
		// Started by the sync suite, the only one that uses it: an idle
		// MinIO's background work would share the cores the other suites
		// measure.
		e.remotes = append(e.remotes, remoteSpec{Name: "minio", Note: "a private MinIO on loopback"})
	}
	return e, nil
}

// startMinIO starts the private MinIO of the sync suite, if the suite has
// one, and sets its remote's URL; closeMinIO stops it.
func (e *env) startMinIO(ctx context.Context) error {
	k := slices.IndexFunc(e.remotes, func(r remoteSpec) bool { return r.Name == "minio" && r.URL == "" })
	if k < 0 {
		return nil
	}
	m, err := testserver.StartMinIO(ctx)
	if err != nil {
		return fmt.Errorf("bench all: start MinIO: %w", err)
	}
	e.stopMinIO = func() { _ = m.Stop() }
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			e.closeMinIO()
			return err
		}
	}
	bucket := fmt.Sprintf("bench-%08x", rand.Uint32())
	// A MinIO that answers may still be initialising: retry, bounded.
	err = m.CreateBucket(ctx, bucket)
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(200 * time.Millisecond)
		err = m.CreateBucket(ctx, bucket)
	}
	if err != nil {
		e.closeMinIO()
		return fmt.Errorf("bench all: MinIO bucket: %w", err)
	}
	e.remotes[k].URL = m.URL(bucket)
	return nil
}

func (e *env) closeMinIO() {
	if e.stopMinIO != nil {
		e.stopMinIO()
		e.stopMinIO = nil
		// A later suite starts a MinIO of its own.
		for k := range e.remotes {
			if e.remotes[k].Name == "minio" {
				e.remotes[k].URL = ""
			}
		}
	}
}

func (e *env) close() {
	e.closeMinIO()
	if e.raw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = e.deleteKeys(ctx, "emq:{"+e.queue+"}*")
		cancel()
		e.raw.Close()
	}
	for k := len(e.stop) - 1; k >= 0; k-- {
		e.stop[k]()
	}
}

// connect returns an mq client of the run's Redis.
func (e *env) connect(ctx context.Context) (*mq.Client, error) {
	return mq.Connect(ctx, mq.Options{URL: e.redisURL})
}

// rawClient connects a plain rueidis client for what mq does not offer:
// INFO memory, and deleting the run's keys.
func rawClient(url string) (rueidis.Client, error) {
	ep, err := mq.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o := rueidis.ClientOption{InitAddress: ep.Addrs, Username: ep.Username, Password: ep.Password,
		SelectDB: ep.DB, DisableCache: true, ForceSingleClient: len(ep.Addrs) == 1}
	if ep.TLS {
		o.TLSConfig = &tls.Config{InsecureSkipVerify: ep.SkipVerify} //nolint:gosec // as the URL asks
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("bench all: connect %s: %w", ep, err)
	}
	return c, nil
}

// usedMemory returns INFO memory's used_memory.
func (e *env) usedMemory(ctx context.Context) (int64, error) {
	s, err := e.raw.Do(ctx, e.raw.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return 0, err
	}
	v := infoField(s, "used_memory")
	if v == "" {
		return 0, errors.New("no used_memory in INFO memory")
	}
	return strconv.ParseInt(v, 10, 64)
}

// deleteKeys deletes every key matching pattern (SCAN, then DEL).
func (e *env) deleteKeys(ctx context.Context, pattern string) error {
	var cursor uint64
	for {
		se, err := e.raw.Do(ctx, e.raw.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return err
		}
		for _, k := range se.Elements {
			if err := e.raw.Do(ctx, e.raw.B().Del().Key(k).Build()).Error(); err != nil {
				return err
			}
		}
		if cursor = se.Cursor; cursor == 0 {
			return nil
		}
	}
}

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
