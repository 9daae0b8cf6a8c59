package resp

import (
	"strings"

	"github.com/echostore/echostore/api"
)

// Scope is what an authenticated connection may do: its token's scope
// (api.Scope, serve's): each scope includes the ones
// below it, ScopeAdmin ⊇ ScopeWrite ⊇ ScopeRead.
type Scope = api.Scope

// The scopes, lowest first (api's).
const (
	ScopeNone  = api.ScopeNone
	ScopeRead  = api.ScopeRead
	ScopeWrite = api.ScopeWrite
	ScopeAdmin = api.ScopeAdmin
)

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

// adminCommands administer the server, or run scripts (EVAL, EVALSHA and
// FCALL; their read-only forms, which Redis refuses to let write, are
// read's). The write rule refuses some of them whatever the token
// (writerule.CheckCommand: FLUSHALL, FLUSHDB, SWAPDB, DEBUG, REPLICAOF,
// the scripts, …), before the scope is checked.
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
	return sc
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
