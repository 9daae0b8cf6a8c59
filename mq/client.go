package mq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/redis/rueidis"
)

// Options configure a Client. The zero value of every field but URL means
// its default.
type Options struct {
	// URL is the Redis URL (see Endpoint for the accepted form).
	URL string
	// Node is the node number of the ids this client mints (0..1023),
	// normally from ECHOSTORE_NODE. Producers sharing a node are safe:
	// colliding ids are re-minted above the stream's top.
	Node int
	// Minter mints the record ids; it overrides Node. Tests give one with a
	// fixed clock to force collisions.
	Minter *brand.Minter
	// AllowEviction connects even when maxmemory-policy may evict keys.
	// Eviction drops streams silently: leave it false outside tests.
	AllowEviction bool
	// Limits bound a record (defaults: DefaultMaxFields, DefaultMaxBytes).
	Limits Limits
	// ChunkRecords and ChunkBytes bound one append or enqueue script call
	// (defaults 256 records or jobs, 1 MiB; a record or job larger than
	// ChunkBytes goes alone).
	ChunkRecords int // records (or jobs) per chunk
	ChunkBytes   int // bytes of names and values per chunk
	// AppendRetries is how often an append or enqueue chunk whose reply was
	// lost, or that a server still loading its data refused (LOADING), is
	// sent again with the same ids before it fails (default 5): with
	// ErrOutcomeUnknown if a reply was lost, since the chunk may have run.
	AppendRetries int
	// RetryBackoff is the first pause before such a retry; it doubles on
	// each one (default 50ms).
	RetryBackoff time.Duration
	// PageSize is the number of entries per XRANGE of Read (default 512).
	PageSize int
	// LaneCap is the approximate length a lane is capped at (default 10000).
	LaneCap int64
	// LaneBlock is how long one XREAD BLOCK of a lane follower waits before
	// it checks its context again (default 2s).
	LaneBlock time.Duration
	// ScriptAppend appends every chunk through the append script, as
	// before appends became transactions of native XADDs (appendTx). A
	// client also falls back to it when the server refuses MULTI/EXEC (an
	// ACL without @transaction). Both append a chunk whole or not at all;
	// the script costs Redis about four times the time per record.
	ScriptAppend bool
	// Jobs configures the job queues.
	Jobs JobOptions
	// Logger receives the client's logs (default: slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Limits = o.Limits.withDefaults()
	if o.ChunkRecords <= 0 {
		o.ChunkRecords = 256
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 1 << 20
	}
	if o.AppendRetries <= 0 {
		o.AppendRetries = 5
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.PageSize <= 0 {
		o.PageSize = 512
	}
	if o.LaneCap <= 0 {
		o.LaneCap = 10000
	}
	if o.LaneBlock <= 0 {
		o.LaneBlock = 2 * time.Second
	}
	o.Jobs = o.Jobs.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Client is a connection to Redis or a Redis Cluster for streams, lanes and
// job queues. It is safe for concurrent use; concurrent calls are pipelined
// on shared connections.
type Client struct {
	rdb    rueidis.Client
	opts   Options
	ep     Endpoint
	minter *brand.Minter
	log    *slog.Logger
	lua    scriptSet
	tx     bool // first sends of append chunks go as transactions (appendTx)
	txMin  int  // … chunks of at least txMin records (defaultTxMinRecords)
	stats  counters
	slots  sync.Map // stream key → *streamSlot
}

type scriptSet struct {
	append, trim, setID, publish                *rueidis.Lua
	enqueue, claim, ack, fail, recover, redrive *rueidis.Lua
}

type counters struct {
	chunks, remints, retries atomic.Int64
}

// Stats counts what a Client did since it was made.
type Stats struct {
	// Chunks is the number of append chunks that landed.
	Chunks int64
	// Remints counts chunks rejected as not above the stream's top and
	// re-minted above it (another producer appended first).
	Remints int64
	// Retries counts chunks (appends and enqueues) sent again after their
	// reply was lost or a LOADING reply.
	Retries int64
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{Chunks: c.stats.chunks.Load(), Remints: c.stats.remints.Load(), Retries: c.stats.retries.Load()}
}

// Connect parses opts.URL, connects, and checks the server: Redis ≥ 7
// and, on every master, a maxmemory-policy that does not evict
// (invariant 9). An evicting policy fails with an error wrapping
// ErrEvictingPolicy unless opts.AllowEviction or the URL's allow_eviction
// option is set.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	ep, err := ParseURL(opts.URL)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := ep.tlsConfig()
	if err != nil {
		return nil, err
	}
	minter := opts.Minter
	if minter == nil {
		if minter, err = brand.NewMinter(opts.Node); err != nil {
			return nil, fmt.Errorf("node %d (ECHOSTORE_NODE): %w", opts.Node, err)
		}
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      ep.Addrs,
		Username:         ep.Username,
		Password:         ep.Password,
		SelectDB:         ep.DB,
		ClientName:       ep.ClientName,
		TLSConfig:        tlsCfg,
		Dialer:           net.Dialer{Timeout: ep.DialTimeout, KeepAlive: 30 * time.Second},
		ConnWriteTimeout: ep.Timeout,
		DisableCache:     true,
		AlwaysPipelining: true, // so that cancelling a context ends a blocked XREAD
		RetryDelay:       readRetryDelay,
		// A pipeline of append transactions (appendPipelined) reaches Redis
		// in pieces of this size while the rest is written, instead of in one
		// write at the end of rueidis's default 0.5 MiB: Redis appends the
		// first chunks while the client writes the last (HTTP append 0.45× →
		// 0.48× of pipelined XADD, docs/BENCHMARKS.md), and each connection
		// holds less.
		WriteBufferEachConn: 64 << 10,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", ep, err)
	}
	c := &Client{rdb: rdb, opts: opts, ep: ep, minter: minter, log: opts.Logger, lua: newScriptSet(), txMin: defaultTxMinRecords}
	if rdb.Mode() == rueidis.ClientModeCluster && ep.DB != 0 {
		rdb.Close()
		return nil, fmt.Errorf("%w %s: a Redis Cluster has only db 0", ErrBadURL, ep)
	}
	if err := c.checkServers(ctx, opts.AllowEviction || ep.AllowEviction); err != nil {
		rdb.Close()
		return nil, err
	}
	if !opts.ScriptAppend {
		c.tx = c.canTransact(ctx)
	}
	return c, nil
}

// canTransact reports whether the server runs an empty MULTI/EXEC: appends
// go as transactions unless it refuses one (a server whose ACL refuses
// MULTI would run a transaction's commands one by one). LOADING is no
// refusal: the server runs transactions once loaded.
func (c *Client) canTransact(ctx context.Context) bool {
	// DISCARD ends the transaction in case EXEC alone was refused and left
	// the connection in MULTI (it fails, harmlessly, when EXEC ran).
	res := c.rdb.DoMulti(ctx, c.rdb.B().Multi().Build(), c.rdb.B().Exec().Build(), c.rdb.B().Discard().Build())
	for _, r := range res[:2] {
		if err := r.Error(); err != nil && isServerError(err) && !isLoading(err) {
			c.log.Warn("Redis refuses MULTI/EXEC; appends go through the append script", "err", err)
			return false
		}
	}
	return true
}

func newScriptSet() scriptSet {
	return scriptSet{
		append:  rueidis.NewLuaScript(scriptAppend),
		trim:    rueidis.NewLuaScript(scriptTrim),
		setID:   rueidis.NewLuaScript(scriptSetID),
		publish: rueidis.NewLuaScript(scriptPublish),
		enqueue: rueidis.NewLuaScript(scriptEnqueue),
		claim:   rueidis.NewLuaScript(scriptClaim),
		ack:     rueidis.NewLuaScript(scriptAck),
		fail:    rueidis.NewLuaScript(scriptFail),
		recover: rueidis.NewLuaScript(scriptRecover),
		redrive: rueidis.NewLuaScript(scriptRedrive),
	}
}

// Close closes the client's connections.
func (c *Client) Close() { c.rdb.Close() }

// Ping sends one PING to Redis (to one node of a Cluster): nil if it
// answers within ctx.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.rdb.Do(ctx, c.rdb.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redis %s: ping: %w", c.ep, err)
	}
	return nil
}

// Endpoint returns where the client is connected.
func (c *Client) Endpoint() Endpoint { return c.ep }

// Minter returns the client's id minter.
func (c *Client) Minter() *brand.Minter { return c.minter }

// evicts reports whether Redis may evict keys under a maxmemory-policy.
// Only noeviction is safe: the volatile-* policies evict keys that have a
// TTL, and the archive driver's lease is such a key (its early eviction
// would let a second driver in).
func evicts(policy string) bool { return policy != "noeviction" }

// checkServers checks every master's version and eviction policy.
func (c *Client) checkServers(ctx context.Context, allowEviction bool) error {
	nodes := c.rdb.Nodes()
	if len(nodes) == 0 {
		return fmt.Errorf("connect to %s: no server answered", c.ep)
	}
	for addr, n := range nodes {
		res := n.DoMulti(ctx, n.B().Role().Build(), n.B().Info().Section("server").Build(), n.B().Info().Section("memory").Build())
		master, err := isMaster(res[0])
		if err != nil {
			return fmt.Errorf("ROLE on %s: %w", addr, err)
		}
		if !master {
			continue // replicas follow their master and do not evict on their own
		}
		server, err := res[1].ToString()
		if err != nil {
			return fmt.Errorf("INFO server on %s: %w", addr, err)
		}
		if major := infoField(server, "redis_version"); !atLeast7(major) {
			return fmt.Errorf("server %s runs Redis %s; echostore needs Redis 7 or later", addr, major)
		}
		memory, err := res[2].ToString()
		if err != nil {
			return fmt.Errorf("INFO memory on %s: %w", addr, err)
		}
		policy := infoField(memory, "maxmemory_policy")
		if policy == "" {
			if policy, err = configPolicy(ctx, n); err != nil {
				return fmt.Errorf("server %s: cannot read maxmemory-policy (INFO memory and CONFIG GET): %w; "+
					"make sure it is noeviction, then connect with allow_eviction=true to skip this check", addr, err)
			}
		}
		if !evicts(policy) {
			continue
		}
		if allowEviction {
			c.log.Warn("redis may evict keys; records can be lost silently", "server", addr, "maxmemory-policy", policy)
			continue
		}
		return fmt.Errorf("server %s has maxmemory-policy %s: %w, which would drop streams silently; "+
			"set it to noeviction (CONFIG SET maxmemory-policy noeviction, and maxmemory-policy noeviction "+
			"in redis.conf), or accept the risk with allow_eviction=true in the URL", addr, policy, ErrEvictingPolicy)
	}
	return nil
}

func configPolicy(ctx context.Context, n rueidis.Client) (string, error) {
	m, err := n.Do(ctx, n.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	if err != nil {
		return "", err
	}
	if p := m["maxmemory-policy"]; p != "" {
		return p, nil
	}
	return "", errors.New("CONFIG GET maxmemory-policy returned nothing")
}

// infoField returns the value of name in an INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+":"); ok {
			return v
		}
	}
	return ""
}

func atLeast7(version string) bool {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 7
}

// readRetries bounds how often the client sends a read-only command again
// after a network error (rueidis's own retry, which by default goes on until
// the context ends): with Redis down, a read fails within about a second
// (IsUnavailable) instead of hanging a caller whose context has no deadline.
const readRetries = 6

// readRetryDelay is the pause before retry attempts+1 of a read-only
// command: 10ms doubling, then none (a negative delay ends the retries). A
// blocking read (a lane follower's XREAD BLOCK, which has no caller waiting
// on an answer) is retried as before, until its context ends, 1ms doubling
// up to 1s, so that followers ride out a Redis restart.
func readRetryDelay(attempts int, cmd rueidis.Completed, _ error) time.Duration {
	if cmd.IsBlock() {
		return min(time.Millisecond<<min(attempts, 10), time.Second)
	}
	if attempts >= readRetries {
		return -1
	}
	return 10 * time.Millisecond << attempts
}

// isServerError reports whether err is an error reply from the server (the
// command was executed and refused), as opposed to a failure to get a reply.
func isServerError(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// isLoading reports whether err is a LOADING error reply: the server is
// loading its dataset (after a restart) and runs no command until it is
// done.
func isLoading(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsLoading()
}
