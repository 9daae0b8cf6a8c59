package server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/names"
)

// Defaults of a Config.
const (
	// DefaultListen is the address the HTTP server listens on.
	DefaultListen = "127.0.0.1:7070"
	// DefaultBeat is how often the drivers run a cycle.
	DefaultBeat = 5 * time.Second
	// DefaultSweep is how often the beat reads the top of an idle archived
	// stream to find entries that others appended (Config.Sweep).
	DefaultSweep = echostore.DefaultSweep
	// DefaultKeep is the window of a stream that comes into being on first
	// use: the newest DefaultKeep records stay live, the rest are archived.
	DefaultKeep = 10000
	// DefaultMaxBody bounds a request body (bytes).
	DefaultMaxBody = 8 << 20
	// DefaultBodyTimeout bounds how long a request's body may take to arrive.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxReadLimit bounds the records one GET of a stream returns
	// when the request gives no limit.
	DefaultMaxReadLimit = 10000
	// DefaultMaxStreams bounds the streams a server cycles (Config.MaxStreams).
	DefaultMaxStreams = 10000
	// DefaultGCEvery is how often the background remote GC runs
	// (Config.GCEvery).
	DefaultGCEvery = 10 * time.Minute
)

// ErrConfig is wrapped by every error about a configuration.
var ErrConfig = errors.New("invalid serve configuration")

// StreamConfig declares one stream: its retention window and whether what
// the window drops is archived (folded, then trimmed) or only trimmed.
type StreamConfig struct {
	// Name is the stream's name (in a Queue's Streams list).
	Name string
	// Key is the Redis key of a stream an application writes (in the
	// top-level Streams list, names.ParseKey): the stream is K itself.
	Key string
	// Keep leaves the newest Keep records live (0: no count limit).
	Keep int64
	// MaxAge leaves records younger than MaxAge live (0: no age limit).
	MaxAge time.Duration
	// Archived: fold before trim (nil: the default's).
	Archived *bool
	// TrimAfter is "local" or "remote" ("": the default's).
	TrimAfter string
	// RetainCount keeps at most the newest RetainCount archived records,
	// dropping older ones on every cycle (archive.Retention.Count; 0: no
	// limit). With RetainAge, the stream's retention horizon; a stream
	// that gives neither has the default's.
	RetainCount uint64
	// RetainAge drops archived records minted longer ago than RetainAge on
	// every cycle (archive.Retention.MaxAge; 0: no limit).
	RetainAge time.Duration
	// MaxLive is the most records beyond the window a consumer group may
	// hold back before it is stalled (archive.GroupLimits.MaxLive; 0: the
	// default's, else 10 × keep; negative: no limit).
	MaxLive int64
	// MaxHold is the greatest age of the oldest entry a consumer group may
	// hold back before it is stalled (archive.GroupLimits.MaxHold; 0: the
	// default's, else max_age + 1h; negative: no limit).
	MaxHold time.Duration
	// StalledGroups is what a cycle does about a stalled group: "hold"
	// (keep its entries live) or "archive" (trim past them; the archive
	// serves them). "": the default's, else hold.
	StalledGroups string
}

// QueueConfig declares a queue and its streams.
type QueueConfig struct {
	// Name is the queue's name (names.ParseQueue).
	Name string
	// Streams are the queue's streams, each by its Name.
	Streams []StreamConfig
}

// Config configures a Server. The zero value of every field but Data and
// Redis means its default; New (and Checked) refuse a value out of range
// with an error wrapping ErrConfig or ErrInsecure. Serve's YAML file
// (--config, docs/SERVE.md) is decoded into one by cmd/echostore; the
// comments name a field's key in that file where it has one.
type Config struct {
	// Listen is the HTTP address (default DefaultListen). A non-loopback
	// address needs a token (Token or Tokens).
	Listen string
	// RESP, if set, is the address of the RESP front (package resp): the
	// Redis protocol, archived streams read as archive ∪ live, every other
	// command relayed to Redis (docs/RESP.md). It needs AUTH with a token
	// when the server has tokens; an address other than loopback needs a
	// token, as Listen does.
	RESP string
	// Token, if set, is a bearer token with the admin scope (at least
	// MinTokenLen bytes). Tokens, whose values are read from files, keep
	// them out of the configuration.
	Token string
	// Tokens are the bearer tokens the server accepts, each with its
	// scopes. With Token and Tokens both empty the API is open to every
	// caller that passes the browser boundary (loopback only).
	Tokens []TokenConfig
	// AllowedHosts are the Host header values the server answers besides
	// its listen address ("name" for any port, or "name:port"): the names
	// a reverse proxy or a DNS name in front of it gives. Any other Host is
	// 421 Misdirected Request (a DNS-rebinding page reads nothing).
	AllowedHosts []string
	// MetricsPublic serves /metrics without a token; by default it needs
	// the read scope once the server has a token (its series name every
	// queue and stream).
	MetricsPublic bool
	// Faults registers the fault route, POST /v1/streams/{q}/{s}/fault
	// (admin scope), which makes the next cycle of a stream skip its trim:
	// for demos and drills only. Without it the route does not exist (404).
	Faults bool
	// Redis is the Redis URL.
	Redis string
	// Data is the data directory; its graft store is Data/graft.
	Data string
	// Remote is the object-store URL (default file://<Data>/remote).
	Remote string
	// RemoteKeyFile, if set, encrypts at rest every object written to the
	// remote, with the key the file holds: 32 random bytes, or them as 64
	// hex digits or 44 base64 characters (openssl rand -hex 32;
	// graft/remote/sealed.ParseKey). Anything else is refused at start.
	RemoteKeyFile string
	// RemoteOldKeyFiles are keys that still read objects sealed before a
	// rotation (never write); they need RemoteKeyFile (or RemoteKey).
	RemoteOldKeyFiles []string
	// RemoteKey is the key in place of RemoteKeyFile (serve parses it from
	// ECHOSTORE_REMOTE_KEY); RemoteKeyFile wins. Serve's configuration
	// file has no key for it: a file names a key file.
	RemoteKey sealed.Key
	// Dev allows a mem:// remote (serve --dev): the remote log then lives
	// in the process's memory, so a sync enqueue's acknowledgement means
	// nothing after a crash. For demos and tests only.
	Dev bool
	// Node is the node number of the ids this server mints.
	Node int
	// Restore rebuilds a data dir that holds no store (a lost disk) from
	// the remote before serving (echostore.RestoreIfEmpty): every archive
	// volume of the remote and this node's accept volumes, lazily; a data
	// dir that holds a store opens as it is, one that holds anything else
	// is refused (echostore.ErrNotEmpty). The remote must be outside the
	// data dir.
	Restore bool
	// Beat is how often the archive driver and retention run (default
	// DefaultBeat).
	Beat time.Duration
	// Sweep bounds how long an archived stream that others append to
	// (plain XADD, key streams) waits for its cycle: the beat cycles an
	// archived stream only when something may have changed (appends
	// through echostore name it in the change feed, emq:{Q}:dirty), and
	// reads the top of every other stream of its share once per Sweep
	// (default DefaultSweep; docs/SERVE.md, "The beat").
	Sweep time.Duration
	// ReplicateEvery is the background replication's bound: every archive
	// and accept volume is pushed within ReplicateEvery of its first commit
	// not yet pushed, whatever trim_after says; a quiet volume makes no
	// request (echostore.Config.ReplicateEvery). 0: the default,
	// echostore.DefaultReplicateEvery (1s); negative: off (volumes reach
	// the remote only through trim_after: remote, sync enqueues and
	// `volume push`).
	ReplicateEvery time.Duration
	// Defaults applies to streams that come into being on first use and
	// fills what a declared stream leaves out. Zero: archived, Keep
	// DefaultKeep, trim after local.
	Defaults StreamConfig
	// Queues declares queues and streams; their streams are cycled from
	// the first beat on, used or not.
	Queues []QueueConfig
	// Streams declares streams at any Redis key, each by its Key (no
	// Name): the streams applications already write. They are cycled from
	// the first beat on; one whose key does not exist yet is skipped until
	// it does.
	Streams []StreamConfig
	// CacheSize is the data dir's block cache (cache_size: 1GiB): the
	// archive blocks merge-reads read stay in memory decompressed, up to
	// this much (echostore.Config.CacheSize, graft.Options.CacheSize). A
	// node that serves full reads of a deep archive wants it about the
	// archive's size on disk times two or three (docs/BENCHMARKS.md, issue
	// 19). 0: graft.DefaultCacheSize (128 MiB); below graft.MinCacheSize is
	// refused at start.
	CacheSize ByteSize
	// History is how long the archive volumes keep their past states for
	// as-of reads (history: 24h; echostore.Config.History): ?as_of= and
	// stream read --as-of reach back this far at least. 0 (the default):
	// as far as the local GC horizon alone; negative is refused at start.
	History time.Duration
	// JobOutcomes names the stream of each queue that keeps its jobs'
	// outcomes (job_outcomes: outcomes; echostore.Config.JobOutcomes):
	// every ack, failure and stall's burial is appended to it, and the node
	// declares it with the policy of Defaults at the queue's first ack or
	// fail (a stream of the same name configured under the queue keeps its
	// own), so it is archived, bounded and exported like a stream. Empty
	// (the default): no outcomes are kept.
	JobOutcomes string
	// MaxBody bounds a request body in bytes (default DefaultMaxBody).
	MaxBody int64
	// BodyTimeout bounds how long a request's body may take to arrive once
	// its headers are in (default DefaultBodyTimeout): a client that trickles
	// a body is cut off instead of holding a handler.
	BodyTimeout time.Duration
	// CheckpointEvery is how often serve checkpoints the accept outbox's
	// records not yet durable (default accept.DefaultFlushInterval): with
	// the K records of a block, the bound of what a crash can lose.
	CheckpointEvery time.Duration
	// SampleEvery is how often serve samples the dashboard's live charts
	// (default DefaultSampleEvery; they reach 15 minutes back).
	SampleEvery time.Duration
	// MaxStreams bounds the streams the server cycles: those the
	// configuration declares, those met through the API and those
	// discovered in Redis (default DefaultMaxStreams; there is no
	// unlimited). A stream beyond it is refused (ErrTooManyStreams) before
	// anything is written for it; a configuration that declares more is
	// refused at start. Deleting a stream frees its place.
	MaxStreams int
	// MaxQueues bounds the job queues the accept tier takes (each has an
	// accept volume, a committer and a dispatcher): an enqueue on a queue
	// new beyond it is refused (accept.ErrTooManyQueues, HTTP 403) before
	// anything is recorded. Queues with work left from before a restart are
	// always taken. Default accept.DefaultMaxQueues; there is no unlimited.
	MaxQueues int
	// Discover adopts the archived streams registered in Redis (the sets
	// emq:{Q}:archived) that are neither declared nor used through the API,
	// on the first beat and then at most every echostore.DefaultDiscoverEvery (nil: true).
	Discover *bool
	// GCEvery is how often serve's background remote GC runs over the
	// data dir's volumes (default DefaultGCEvery; negative, e.g. -1s:
	// never): each pass checkpoints the remote logs that moved and deletes
	// what no checkpoint older than GCGrace, nor any commit after it,
	// references (echostore.Config.GCEvery; docs/REMOTE.md, "Remote GC").
	GCEvery time.Duration
	// GCGrace is how long a reader's pull stays good: no remote object a
	// state pulled within it references is deleted (default
	// echostore.DefaultGCGrace). A follower idle for longer pulls again.
	GCGrace time.Duration

	// AllowEviction connects to a Redis whose maxmemory-policy may evict
	// (tests only; eviction drops streams silently).
	AllowEviction bool
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger

	// tokens are Token and Tokens with their values, read by withDefaults.
	tokens []authToken
	// remoteKeys are the remote's keys, read by withDefaults.
	remoteKeys *sealed.Keyring
	// outcomes are JobOutcomes and the defaults' policy, set by
	// withDefaults.
	outcomes echostore.JobOutcomes
}

// ByteSize is a size in bytes, written in a configuration as a whole
// number of bytes (134217728) or of a binary unit: KiB, MiB, GiB or TiB
// (128MiB, 1GiB; a space before the unit is allowed). Anything else (a
// fraction, a negative size, a decimal unit such as GB, a size past 2^63)
// is refused by ParseByteSize.
type ByteSize int64

// byteUnits are the units a ByteSize takes, largest first.
var byteUnits = []struct {
	name  string
	shift uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseByteSize parses s as a ByteSize (see ByteSize); the error wraps
// ErrConfig.
func ParseByteSize(s string) (ByteSize, error) {
	bad := func(why string) (ByteSize, error) {
		return 0, fmt.Errorf("%w: size %q: %s (write a whole number of bytes, or of KiB, MiB, GiB or TiB: 512MiB, 1GiB)", ErrConfig, s, why)
	}
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(num, u.name); ok {
			num, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	if num == "" {
		return bad("no number")
	}
	if num[0] == '-' {
		return bad("negative")
	}
	for _, r := range num {
		if r < '0' || r > '9' {
			return bad("not a whole number of one of the units")
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v > math.MaxInt64>>shift {
		return bad("too large")
	}
	return ByteSize(v << shift), nil
}

// UnmarshalText parses text with ParseByteSize, so that a ByteSize
// decodes from any text format (a configuration file, flag.TextVar).
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// String writes b in the largest binary unit that divides it (1GiB,
// 1536MiB, 100B).
func (b ByteSize) String() string {
	for _, u := range byteUnits {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(b>>u.shift), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// TokenConfig is one bearer token of Config.Tokens.
type TokenConfig struct {
	// Name names the token in errors and logs (never its value).
	Name string
	// Scopes are "read", "write" and/or "admin"; the token may do what the
	// highest of them allows (admin includes write, write includes read).
	Scopes []string
	// File holds the token (a trailing newline is trimmed). It must exist,
	// hold at least MinTokenLen bytes and not be readable by every user.
	File string
	// Value is the token itself, for a Config built in code (serve's
	// configuration file has no key for it: a file gives File).
	Value string
}

// stream is a resolved StreamConfig.
type stream struct {
	ref       names.StreamRef // the zero StreamRef for the defaults
	window    archive.Window
	archived  bool
	trimAfter archive.TrimAfter
	retain    archive.Retention // the archive's retention horizon, every cycle
}

// policy is how the node keeps the stream bounded (echostore.Node.Declare).
func (st stream) policy() echostore.StreamPolicy {
	return echostore.StreamPolicy{Archived: st.archived, Window: st.window, TrimAfter: st.trimAfter, Retain: st.retain}
}

// Checked returns c with its zero fields filled with their defaults, or
// the error that New would fail with (wrapping ErrConfig or ErrInsecure):
// a caller that opens the node itself checks the configuration first.
func (c Config) Checked() (Config, error) { return c.withDefaults() }

// withDefaults fills the zero fields of c and checks it.
func (c Config) withDefaults() (Config, error) {
	if c.remoteKeys == nil {
		ring, err := sealed.LoadKeyring(c.RemoteKeyFile, c.RemoteKey, c.RemoteOldKeyFiles)
		if err != nil {
			return c, fmt.Errorf("%w: remote_key_file: %w", ErrConfig, err)
		}
		c.remoteKeys = ring
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Beat == 0 {
		c.Beat = DefaultBeat
	}
	if c.Beat < 0 {
		return c, fmt.Errorf("%w: beat %v: want a positive duration", ErrConfig, c.Beat)
	}
	if c.Sweep == 0 {
		c.Sweep = DefaultSweep
	}
	if c.Sweep < 0 {
		return c, fmt.Errorf("%w: sweep %v: want a positive duration", ErrConfig, c.Sweep)
	}
	if c.ReplicateEvery == 0 {
		c.ReplicateEvery = echostore.DefaultReplicateEvery
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = accept.DefaultFlushInterval
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.SampleEvery < 0 {
		return c, fmt.Errorf("%w: sample_every %v: want a positive duration", ErrConfig, c.SampleEvery)
	}
	if c.CheckpointEvery < 0 {
		return c, fmt.Errorf("%w: checkpoint_every %v: want a positive duration", ErrConfig, c.CheckpointEvery)
	}
	if c.GCEvery == 0 {
		c.GCEvery = DefaultGCEvery
	}
	if c.GCGrace == 0 {
		c.GCGrace = echostore.DefaultGCGrace
	}
	if c.GCGrace < 0 {
		return c, fmt.Errorf("%w: gc_grace %v: want a positive duration", ErrConfig, c.GCGrace)
	}
	if c.History < 0 {
		return c, fmt.Errorf("%w: history %v: want 0 (none) or a positive duration", ErrConfig, c.History)
	}
	if c.CacheSize == 0 {
		c.CacheSize = graft.DefaultCacheSize
	}
	if c.CacheSize < graft.MinCacheSize {
		return c, fmt.Errorf("%w: cache_size %v: want at least %v (the block cache also holds the store's memtables; default %v)",
			ErrConfig, c.CacheSize, ByteSize(graft.MinCacheSize), ByteSize(graft.DefaultCacheSize))
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxStreams < 0 {
		return c, fmt.Errorf("%w: max_streams %d: want a positive number (default %d; there is no unlimited)",
			ErrConfig, c.MaxStreams, DefaultMaxStreams)
	}
	if c.MaxQueues == 0 {
		c.MaxQueues = accept.DefaultMaxQueues
	}
	if c.MaxQueues < 0 {
		return c, fmt.Errorf("%w: max_queues %d: want a positive number (default %d; there is no unlimited)",
			ErrConfig, c.MaxQueues, accept.DefaultMaxQueues)
	}
	if c.Data == "" {
		return c, fmt.Errorf("%w: no data directory", ErrConfig)
	}
	if c.Redis == "" {
		return c, fmt.Errorf("%w: no Redis URL", ErrConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var err error
	if c.tokens, err = c.loadTokens(); err != nil {
		return c, err
	}
	if len(c.tokens) == 0 && !loopback(c.Listen) {
		return c, fmt.Errorf("%w: --listen %s: give a token of at least %d bytes (--token-file, ECHOSTORE_TOKEN or tokens: in the configuration), or listen on 127.0.0.1",
			ErrInsecure, c.Listen, MinTokenLen)
	}
	if c.RESP != "" && len(c.tokens) == 0 && !loopback(c.RESP) {
		return c, fmt.Errorf("%w: --resp %s: give a token of at least %d bytes (--token-file, ECHOSTORE_TOKEN or tokens: in the configuration), or listen on 127.0.0.1",
			ErrInsecure, c.RESP, MinTokenLen)
	}
	if c.AllowedHosts, err = checkAllowedHosts(c.AllowedHosts); err != nil {
		return c, err
	}
	if c.Discover == nil {
		t := true
		c.Discover = &t
	}
	d := &c.Defaults
	if d.Keep == 0 && d.MaxAge == 0 {
		d.Keep = DefaultKeep
	}
	if d.Archived == nil {
		t := true
		d.Archived = &t
	}
	if d.TrimAfter == "" {
		d.TrimAfter = "local"
	}
	def, err := c.resolve(names.StreamRef{}, *d)
	if err != nil {
		return c, fmt.Errorf("defaults: %w", err)
	}
	if c.JobOutcomes != "" {
		o, err := names.ParseStream(c.JobOutcomes)
		if err != nil {
			return c, fmt.Errorf("%w: job_outcomes: %w", ErrConfig, err)
		}
		c.outcomes = echostore.JobOutcomes{Stream: o, Policy: def.policy()}
	}
	seen := map[names.StreamRef]bool{}
	// Names may hold '.', so two streams can map to one archive volume
	// (a.b/c and a/b.c: archive.a.b.c); archiving both is refused here, and
	// by the volume's recorded owner at run time.
	volumes := map[string][2]string{}
	for _, q := range c.Queues {
		if _, err := names.ParseQueue(q.Name); err != nil {
			return c, fmt.Errorf("%w: queue: %w", ErrConfig, err)
		}
		for _, s := range q.Streams {
			if s.Key != "" {
				return c, fmt.Errorf("%w: stream %s/%s: key %q: a stream of a queue is named by its name; a stream at a key goes in the top-level streams list", ErrConfig, q.Name, s.Name, s.Key)
			}
			ref, err := names.ParseStreamRef(q.Name, s.Name)
			if err != nil {
				return c, fmt.Errorf("%w: stream %s/%s: %w", ErrConfig, q.Name, s.Name, err)
			}
			st, err := c.resolve(ref, s)
			if err != nil {
				return c, err
			}
			if seen[ref] {
				return c, fmt.Errorf("%w: stream %s declared twice", ErrConfig, ref)
			}
			seen[ref] = true
			if !st.archived {
				continue
			}
			v := ref.Volume().String()
			if o, ok := volumes[v]; ok {
				return c, fmt.Errorf("%w: archived streams %s/%s and %s/%s share the archive volume %s; archive one of them under another name",
					ErrConfig, o[0], o[1], q.Name, s.Name, v)
			}
			volumes[v] = [2]string{q.Name, s.Name}
		}
	}
	for _, sc := range c.Streams {
		if sc.Name != "" {
			return c, fmt.Errorf("%w: streams: name %q: a top-level stream is named by its key (key: K); a stream of a queue goes under queues", ErrConfig, sc.Name)
		}
		ref, err := names.ParseKeyRef(sc.Key)
		if err != nil {
			return c, fmt.Errorf("%w: streams: key: %w", ErrConfig, err)
		}
		// A key's volume is its own (names.KeyRef): no two keys, and no
		// key and queue stream, share one.
		if _, err := c.resolve(ref, sc); err != nil {
			return c, err
		}
		if seen[ref] {
			return c, fmt.Errorf("%w: stream %s declared twice", ErrConfig, ref)
		}
		seen[ref] = true
	}
	if len(seen) > c.MaxStreams {
		return c, fmt.Errorf("%w: the configuration declares %d streams, more than max_streams (%d): raise max_streams",
			ErrConfig, len(seen), c.MaxStreams)
	}
	return c, nil
}

// resolve merges sc over the defaults for stream ref; the zero ref checks
// the defaults.
func (c Config) resolve(ref names.StreamRef, sc StreamConfig) (stream, error) {
	st := stream{ref: ref, window: archive.Window{Keep: sc.Keep, MaxAge: sc.MaxAge}}
	if sc.Keep == 0 && sc.MaxAge == 0 && !ref.IsZero() {
		st.window = archive.Window{Keep: c.Defaults.Keep, MaxAge: c.Defaults.MaxAge}
	}
	if st.window.Keep < 0 || st.window.MaxAge < 0 {
		return stream{}, fmt.Errorf("%w: stream %s: negative keep or max_age", ErrConfig, ref)
	}
	groups, gerr := c.groupLimits(sc)
	if gerr != nil {
		return stream{}, fmt.Errorf("%w: stream %s: %w", ErrConfig, ref, gerr)
	}
	st.window.Groups = groups
	arch := sc.Archived
	if arch == nil {
		arch = c.Defaults.Archived
	}
	st.archived = arch == nil || *arch
	ta := sc.TrimAfter
	if ta == "" {
		ta = c.Defaults.TrimAfter
	}
	t, err := archive.ParseTrimAfter(ta)
	if err != nil {
		return stream{}, fmt.Errorf("%w: stream %s: %w", ErrConfig, ref, err)
	}
	st.trimAfter = t
	st.retain = archive.Retention{Count: sc.RetainCount, MaxAge: sc.RetainAge}
	if st.retain == (archive.Retention{}) && !ref.IsZero() {
		st.retain = archive.Retention{Count: c.Defaults.RetainCount, MaxAge: c.Defaults.RetainAge}
	}
	if err := st.retain.Validate(); err != nil {
		return stream{}, fmt.Errorf("%w: stream %s: retain_age: %w", ErrConfig, ref, err)
	}
	if !st.archived && !st.retain.IsZero() && (sc.RetainCount != 0 || sc.RetainAge != 0) {
		return stream{}, fmt.Errorf("%w: stream %s: retain_count and retain_age bound an archive, and the stream is archived: false", ErrConfig, ref)
	}
	if !st.archived {
		st.retain = archive.Retention{}
	}
	if !st.archived && sc.StalledGroups == "archive" {
		return stream{}, fmt.Errorf("%w: stream %s: stalled_groups: archive trims past a group because the archive serves what it passes, and the stream is archived: false", ErrConfig, ref)
	}
	return st, nil
}

// groupLimitsQuery sets the consumer-group limits a cycle request gives
// (max_live, max_hold, stalled_groups) over g, the stream's.
func groupLimitsQuery(qv url.Values, g *archive.GroupLimits) error {
	var err error
	if v := qv.Get("max_live"); v != "" {
		if g.MaxLive, err = strconv.ParseInt(v, 10, 64); err != nil {
			return badRequest("max_live %q: want a number of records (0: the default, 10 × keep; negative: no limit)", v)
		}
	}
	if v := qv.Get("max_hold"); v != "" {
		if g.MaxHold, err = time.ParseDuration(v); err != nil {
			return badRequest("max_hold %q: want a duration such as 2h (0: the default, max_age + 1h; negative: no limit)", v)
		}
	}
	if v := qv.Get("stalled_groups"); v != "" {
		if g.Stalled, err = archive.ParseStalledPolicy(v); err != nil {
			return badRequest("stalled_groups: %w", err)
		}
	}
	return nil
}

// groupLimits merges sc's consumer-group limits over the defaults'.
func (c Config) groupLimits(sc StreamConfig) (archive.GroupLimits, error) {
	g := archive.GroupLimits{MaxLive: sc.MaxLive, MaxHold: sc.MaxHold}
	if g.MaxLive == 0 {
		g.MaxLive = c.Defaults.MaxLive
	}
	if g.MaxHold == 0 {
		g.MaxHold = c.Defaults.MaxHold
	}
	policy := sc.StalledGroups
	if policy == "" {
		policy = c.Defaults.StalledGroups
	}
	p, err := archive.ParseStalledPolicy(policy)
	if err != nil {
		return g, err
	}
	g.Stalled = p
	return g, nil
}

// declared returns the configuration of ref if the configuration declares
// it, with its defaults filled.
func (c Config) declared(ref names.StreamRef) (stream, bool) {
	if k, ok := ref.Key(); ok {
		for _, sc := range c.Streams {
			if sc.Key == k.String() {
				st, err := c.resolve(ref, sc)
				return st, err == nil
			}
		}
		return stream{}, false
	}
	for _, qc := range c.Queues {
		if qc.Name != ref.Queue().String() {
			continue
		}
		for _, sc := range qc.Streams {
			if sc.Name == ref.Stream().String() {
				st, err := c.resolve(ref, sc)
				return st, err == nil
			}
		}
	}
	return stream{}, false
}

// declaredStreams returns every stream the configuration declares, under
// its queues and at its keys, with its defaults filled. The configuration
// has been checked (withDefaults).
func (c Config) declaredStreams() []stream {
	var out []stream
	for _, q := range c.Queues {
		for _, sc := range q.Streams {
			ref, err := names.ParseStreamRef(q.Name, sc.Name)
			if err != nil {
				continue
			}
			if st, err := c.resolve(ref, sc); err == nil {
				out = append(out, st)
			}
		}
	}
	for _, sc := range c.Streams {
		ref, err := names.ParseKeyRef(sc.Key)
		if err != nil {
			continue
		}
		if st, err := c.resolve(ref, sc); err == nil {
			out = append(out, st)
		}
	}
	return out
}
