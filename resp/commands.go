package resp

import (
	"bytes"
	"strings"
)

// Scope is what an authenticated connection may do; each includes the ones
// below it (they match serve's token scopes, server.Scope).
type Scope int

// The scopes, lowest first.
const (
	// ScopeNone may do nothing but authenticate.
	ScopeNone Scope = iota
	// ScopeRead runs commands that change no data (Redis's read-only
	// commands, connection state, subscribing).
	ScopeRead
	// ScopeWrite also runs commands that write data.
	ScopeWrite
	// ScopeAdmin also runs server administration (CONFIG, FLUSHALL, ACL
	// changes, CLIENT KILL, DEBUG, SHUTDOWN, …) and any write to
	// echostore's own keys (emq:…) or to an archived stream key but appends
	// and consumer-group commands (an XADD that trims, MAXLEN or MINID, is
	// no plain append to an archived stream key: admin too).
	ScopeAdmin
)

// String names the scope as serve's configuration does.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// readCommands change no data: the read scope runs them.
var readCommands = set(
	// keys and values
	"get", "mget", "getrange", "substr", "strlen", "exists", "type", "ttl", "pttl", "expiretime", "pexpiretime",
	"keys", "scan", "randomkey", "dbsize", "dump", "object", "touch", "lcs", "bitcount", "bitpos", "getbit", "bitfield_ro",
	"hget", "hmget", "hgetall", "hkeys", "hvals", "hlen", "hexists", "hstrlen", "hscan", "hrandfield",
	"lrange", "lindex", "llen", "lpos",
	"smembers", "sismember", "smismember", "scard", "srandmember", "sscan", "sinter", "sintercard", "sunion", "sdiff",
	"zrange", "zrangebyscore", "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "zrevrange", "zscore", "zmscore",
	"zrank", "zrevrank", "zcard", "zcount", "zlexcount", "zscan", "zrandmember", "zinter", "zunion", "zdiff", "zintercard",
	"pfcount", "geopos", "geodist", "geohash", "georadius_ro", "georadiusbymember_ro", "geosearch",
	"xrange", "xrevrange", "xread", "xlen", "xinfo", "xpending",
	"sort_ro", "eval_ro", "evalsha_ro", "fcall_ro", "memory", "command",
	// connection and transaction state
	"ping", "echo", "select", "multi", "exec", "discard", "watch", "unwatch", "quit", "reset", "hello", "auth",
	"readonly", "readwrite", "asking", "time", "lastsave", "info", "role", "lolwut", "wait", "waitaof",
	// pub/sub: receiving
	"subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "pubsub",
)

// adminCommands administer the server, or run scripts: a script can run
// any command on any key, whatever keys its arguments name (an archived
// stream's XTRIM, FLUSHALL), so EVAL, EVALSHA and FCALL are admin's; their
// read-only forms (EVAL_RO, FCALL_RO), which Redis refuses to let write,
// are read's.
var adminCommands = set(
	"config", "flushall", "flushdb", "debug", "shutdown", "save", "bgsave", "bgrewriteaof", "replicaof", "slaveof",
	"failover", "module", "swapdb", "migrate", "sync", "psync", "slowlog", "latency", "monitor", "acl", "cluster",
	"client", "script", "function", "eval", "evalsha", "fcall",
)

// readSubcommands are the read-scope subcommands of admin commands.
var readSubcommands = map[string]map[string]bool{
	"client":   set("id", "getname", "setname", "info", "list", "tracking", "trackinginfo", "caching", "getredir", "no-evict", "no-touch", "setinfo", "help"),
	"cluster":  set("info", "nodes", "slots", "shards", "keyslot", "myid", "myshardid", "countkeysinslot", "getkeysinslot", "links", "help"),
	"acl":      set("whoami", "cat", "help"),
	"function": set("list", "stats", "dump", "help"),
	"script":   set("exists", "help"),
	"memory":   set("usage", "stats", "doctor", "malloc-stats", "help"),
}

// writeSubcommands are the write-scope subcommands of admin commands.
var writeSubcommands = map[string]map[string]bool{
	"script": set("load"),
}

// ownKeyCommands may touch echostore's own keys (emq:…) with the write
// scope: appending to a stream and working its consumer groups.
var ownKeyCommands = set("xadd", "xack", "xgroup", "xreadgroup", "xclaim", "xautoclaim")

// refused are commands the front does not relay: their replies do not
// follow the one-reply-per-command rule it keeps (CLIENT REPLY OFF|SKIP,
// MONITOR) or they are the replication protocol.
var refused = set("monitor", "sync", "psync")

// needs returns the scope a command needs.
func needs(name string, args [][]byte) Scope {
	sc := ScopeWrite
	switch {
	case readCommands[name]:
		sc = ScopeRead
	case adminCommands[name]:
		sc = ScopeAdmin
		if len(args) > 1 {
			sub := strings.ToLower(string(args[1]))
			if readSubcommands[name][sub] {
				sc = ScopeRead
			} else if writeSubcommands[name][sub] {
				sc = ScopeWrite
			}
		}
	}
	if name == "memory" && len(args) > 1 && !readSubcommands["memory"][strings.ToLower(string(args[1]))] {
		sc = ScopeAdmin // MEMORY PURGE
	}
	if sc == ScopeWrite && !ownKeyCommands[name] {
		for _, a := range args[1:] {
			if bytes.HasPrefix(a, []byte("emq:")) {
				return ScopeAdmin
			}
		}
	}
	return sc
}

// guardsArchived reports whether a command that needs the write scope
// (needs) writes something that becomes admin's when one of its arguments
// is an archived stream key: every write but a plain append and the
// consumer-group commands. An XADD with MAXLEN or MINID trims entries the
// archive has not folded yet, as XTRIM does: it is guarded.
func guardsArchived(name string, args [][]byte) bool {
	if name != "xadd" {
		return !ownKeyCommands[name]
	}
	// XADD key [NOMKSTREAM] [MAXLEN|MINID …] id field value …: the trim
	// option comes before the id, so that a field named MAXLEN is no trim.
	for i := 2; i < len(args) && i < 4; i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("nomkstream")):
			continue
		case bytes.EqualFold(args[i], []byte("maxlen")), bytes.EqualFold(args[i], []byte("minid")):
			return true
		}
		return false
	}
	return false
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// lower returns the lower-case command name of args[0], without
// allocating for the common names.
func lower(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			return strings.ToLower(string(b))
		}
	}
	return string(b)
}
