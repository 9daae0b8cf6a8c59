package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
	"github.com/redis/rueidis"
	"github.com/spf13/cobra"
)

// backend is what the commands run against: a *echostore.Node the command
// opened on --data, or a *client.Client of the serve that holds --data.
// Each command is written once against it.
type backend interface {
	Append(ctx context.Context, ref names.StreamRef, records [][]echostore.Field) (echostore.AppendResult, error)
	Read(ctx context.Context, ref names.StreamRef, opts echostore.ReadOptions) iter.Seq2[echostore.Record, error]
	Cycle(ctx context.Context, ref names.StreamRef, opts echostore.CycleOptions) (echostore.CycleResult, error)
	Status(ctx context.Context, ref names.StreamRef) (echostore.ArchiveStatus, error)
	Delete(ctx context.Context, ref names.StreamRef) (echostore.DeleteResult, error)
	Groups(ctx context.Context, ref names.StreamRef) (echostore.GroupList, error)

	Enqueue(ctx context.Context, q names.Queue, payload []byte, opts echostore.EnqueueOptions) (echostore.Receipt, error)
	EnqueueBatch(ctx context.Context, q names.Queue, jobs []echostore.BatchJob, mode echostore.Mode) (echostore.BatchResult, error)
	Claim(ctx context.Context, q names.Queue, opts echostore.ClaimOptions) (echostore.ClaimResult, error)
	Ack(ctx context.Context, q names.Queue, entries []string) (echostore.AckResult, error)
	Fail(ctx context.Context, q names.Queue, opts echostore.FailOptions) (echostore.FailResult, error)
	Jobs(ctx context.Context, q names.Queue, st echostore.JobState, limit int) (echostore.JobList, error)
	Dead(ctx context.Context, q names.Queue, opts echostore.DeadOptions) (echostore.DeadResult, error)
	Redrive(ctx context.Context, q names.Queue, opts echostore.RedriveOptions) (echostore.RedriveResult, error)
	DeleteDead(ctx context.Context, q names.Queue, entries []string) (echostore.DeleteDeadResult, error)
	QueueStatus(ctx context.Context, q names.Queue) (echostore.QueueStatus, error)
	Queues(ctx context.Context) ([]names.Queue, error)

	Volumes(ctx context.Context) (echostore.VolumeList, error)
	VolumeInfo(ctx context.Context, v names.Volume) (echostore.VolumeInfo, error)
	Push(ctx context.Context, v names.Volume) (echostore.PushResult, error)
	Pull(ctx context.Context, v names.Volume, progress func(done, total int)) (echostore.PullResult, error)
	Hydrate(ctx context.Context, v names.Volume, progress func(done, total int)) (echostore.HydrateResult, error)
	Reset(ctx context.Context, v names.Volume, discard uint64) (echostore.ResetResult, error)
	Checkpoint(ctx context.Context, v names.Volume) (echostore.CheckpointResult, error)
	GC(ctx context.Context, v names.Volume, opts echostore.GCOptions) (echostore.GCResult, error)
}

var (
	_ backend = (*echostore.Node)(nil)
	_ backend = (*client.Client)(nil)
)

// lockWait bounds how long a command waits for another process to release
// the data dir.
const lockWait = 10 * time.Second

// redisPing bounds how long a volume command waits for Redis, which it
// needs only to announce commits and pushes on the volume's lane.
const redisPing = 3 * time.Second

// redisNeed is what a command needs of Redis when it opens the data dir.
type redisNeed int

const (
	redisRequired redisNeed = iota // streams, jobs, the archive
	redisOptional                  // volumes: used if it answers
	redisNone                      // the archive alone (stream read --archive-only)
	redisLive                      // Redis alone, no data dir (appends, live reads, claims)
)

// session is an open backend and how to close it.
type session struct {
	backend
	node  *echostore.Node // nil through serve
	close func()
}

// nodeConfig is the one configuration of a Node that a command opens on
// --data (every command but serve, whose server.Config reads the same
// flags): the data dir, the remote and its keys (keys, from g.keyring),
// the node number, the lock wait, the log and the remote drivers. Jobs
// are deferred: a stream, volume or restore command neither recovers nor
// pushes pending jobs. Redis is the caller's to add, as it needs it.
func (g *globals) nodeConfig(keys *sealed.Keyring, node int) echostore.Config {
	return echostore.Config{Data: g.data, Remote: g.remote, RemoteKeys: keys, NodeNumber: node, LockWait: lockWait, Logger: g.log,
		Drivers: drivers.All(), DeferJobs: true, History: g.historyD, JobOutcomes: echostore.JobOutcomes{Stream: g.jobOutcomesS}}
}

// open returns the backend of a command: the serve that holds --data, if
// one answers on <data>/serve.sock, else a Node opened on --data with
// Redis as need says. tune, if given, adjusts the Config of a Node opened
// here (not a serve's).
func open(ctx context.Context, g *globals, need redisNeed, tune ...func(*echostore.Config)) (*session, error) {
	// The remote's keys are checked before anything is contacted.
	keys, err := g.keyring()
	if err != nil {
		return nil, err
	}
	c, ok, err := viaServe(ctx, g)
	if err != nil {
		return nil, err
	}
	if ok {
		return &session{backend: c, close: func() { _ = c.Close() }}, nil
	}
	node, err := nodeFromEnv()
	if err != nil {
		return nil, err
	}
	cfg := g.nodeConfig(keys, node)
	switch need {
	case redisLive:
		// What needs Redis alone neither opens nor locks the data dir, so
		// it runs beside the process that holds it.
		cfg = echostore.Config{LiveOnly: true, Redis: g.redis, NodeNumber: node, Logger: g.log}
		if !g.jobOutcomesS.IsZero() {
			// A live-only node has no archive: its outcome streams are
			// trimmed to the default window, not archived.
			cfg.JobOutcomes = echostore.JobOutcomes{Stream: g.jobOutcomesS,
				Policy: echostore.StreamPolicy{Window: echostore.DefaultOutcomePolicy().Window}}
		}
	case redisRequired:
		cfg.Redis = g.redis
	case redisOptional:
		if err := pingRedis(ctx, g); err != nil {
			g.log.Info("LSN events not announced: Redis is not reachable", "redis", mq.Redact(g.redis), "err", err)
		} else {
			cfg.Redis = g.redis
		}
	}
	for _, t := range tune {
		t(&cfg)
	}
	n, err := echostore.Open(ctx, cfg)
	switch {
	case err == nil:
		return &session{backend: n, node: n, close: func() {
			if err := n.Close(context.WithoutCancel(ctx)); err != nil {
				g.log.Warn("close the data dir", "err", err)
			}
		}}, nil
	case errors.Is(err, echostore.ErrDataLocked):
		return nil, fmt.Errorf("%w; another echostore process is using --data %s: stop it or run the command there", err, g.data)
	case errors.Is(err, mq.ErrBadURL), errors.Is(err, mq.ErrEvictingPolicy):
		return nil, err
	case cfg.Redis != "" && isRedisError(err):
		return nil, fmt.Errorf("%w; check that Redis is running and that --redis (or ECHOSTORE_REDIS) points at it", err)
	}
	return nil, fmt.Errorf("%w; check --data and --remote (or ECHOSTORE_REMOTE)", err)
}

// withBackend opens the backend of a command (open, with Redis as need
// says), runs f with it and closes it after.
func withBackend(cmd *cobra.Command, g *globals, need redisNeed, f func(b backend) error) error {
	b, err := open(cmd.Context(), g, need)
	if err != nil {
		return err
	}
	defer b.close()
	return f(b)
}

// isRedisError reports whether an Open failed at Redis: unreachable,
// too slow, or refusing the credentials.
func isRedisError(err error) bool {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		msg := re.Error()
		if strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "NOPERM") {
			return true
		}
	}
	return mq.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded)
}

// pingRedis connects to --redis within redisPing.
func pingRedis(ctx context.Context, g *globals) error {
	cctx, cancel := context.WithTimeout(ctx, redisPing)
	defer cancel()
	c, err := mq.Connect(cctx, mq.Options{URL: g.redis, Logger: g.log})
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// viaServe returns a client of the serve that holds --data, and true, when
// <data>/serve.sock answers GET /healthz with "ok". No socket, a socket
// nobody listens on (a serve that died) or a serve that is shutting down
// give false: the command opens the data dir itself (and meets its lock, if
// a serve still holds it). err is non-nil when the socket answers something
// other than echostore serve, or is another user's serve's. The token, if
// serve has one, comes from --token-file (or ECHOSTORE_TOKEN_FILE), else
// ECHOSTORE_TOKEN: never from a flag's value, which every user would see in
// ps. Without one, serve knows the command's user by the socket.
func viaServe(ctx context.Context, g *globals) (*client.Client, bool, error) {
	sock := filepath.Join(g.data, server.SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil, false, nil
	}
	token := os.Getenv("ECHOSTORE_TOKEN")
	if g.tokenFile != "" {
		var err error
		if token, err = server.ReadTokenFile(g.tokenFile); err != nil {
			return nil, false, fmt.Errorf("--token-file: %w", err)
		}
	}
	c := client.Unix(sock, client.Options{Token: token})
	hctx, cancel := context.WithTimeout(ctx, client.DialTimeout)
	defer cancel()
	_, err := c.Health(hctx)
	switch {
	case errors.Is(err, client.ErrPeerRefused):
		// Another user's serve: the data dir is not this user's either.
		return nil, false, err
	case errors.Is(err, client.ErrNotServe):
		return nil, false, err
	case errors.Is(err, client.ErrUnavailable):
		return nil, false, nil // shutting down: it releases the data dir
	case err != nil:
		return nil, false, nil // nobody listens: a serve that died left it
	}
	// "ok", or "degraded" (its Redis or remote is down): serve holds the
	// data dir either way and answers what needs neither.
	return c, true, nil
}

// printJSON prints v as one JSON line (the field order of its type).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSONLines prints each value as one JSON line.
func printJSONLines[T any](w io.Writer, vals []T) error {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for _, v := range vals {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return out.Flush()
}

// streamRef checks the QUEUE STREAM arguments.
func streamRef(q, s string) (names.StreamRef, error) {
	return names.ParseStreamRef(q, s)
}
