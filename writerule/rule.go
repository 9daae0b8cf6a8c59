package writerule

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// Prefix starts the text of every refusal of the rule (Verdict.Reply):
// Redis's NOPERM error code (clients raise their permission error, e.g.
// redis-py's NoPermissionError) and the word echostore.
const Prefix = "NOPERM echostore: "

// Scope is the caller's token scope (api.Scope): each scope includes the ones
// below it, ScopeAdmin ⊇ ScopeWrite ⊇ ScopeRead.
type Scope = api.Scope

// The scopes, lowest first (api's).
const (
	ScopeNone  = api.ScopeNone
	ScopeRead  = api.ScopeRead
	ScopeWrite = api.ScopeWrite
	ScopeAdmin = api.ScopeAdmin
)

// Role is what a key is to echostore.
type Role int

// The roles.
const (
	// Other is any key echostore does not keep: the rule lets Redis's
	// commands change it (the token's scope still applies).
	Other Role = iota
	// Own is a key of echostore's own (it starts with emq:) that is not an
	// archived stream: a job stream emq:{Q}:jobs, its dead letters, a lane,
	// a seam cache, a lease, a registry.
	Own
	// Bounded is an archived stream: emq:{Q}:stream:S registered in
	// emq:{Q}:archived, or an application's key K registered in
	// emq:{T}:archived-keys. Its entries at or below the watermark W are
	// folded into the archive; those above are in Redis alone.
	Bounded
)

// String names the role.
func (r Role) String() string {
	switch r {
	case Own:
		return "own"
	case Bounded:
		return "bounded"
	}
	return "other"
}

// Keys tells the rule what keys are. The rule asks it only about the
// arguments it must know (see Check); an error refuses the command.
type Keys interface {
	// Bounded reports whether key is an archived stream (resp.Lookup).
	Bounded(ctx context.Context, key []byte) (bool, error)
	// Watermark returns the watermark W of the archived stream key (its
	// seam cache's xid); ok is false when nothing is folded yet.
	Watermark(ctx context.Context, key []byte) (w xid.ID, ok bool, err error)
}

// RoleOf returns the role of key: Bounded if keys says so, else Own for a
// key under emq:, else Other.
func RoleOf(ctx context.Context, keys Keys, key []byte) (Role, error) {
	if keys != nil && len(key) > 0 {
		b, err := keys.Bounded(ctx, key)
		if err != nil {
			return Other, err
		}
		if b {
			return Bounded, nil
		}
	}
	if bytes.HasPrefix(key, []byte(names.ReservedKeyPrefix)) {
		return Own, nil
	}
	return Other, nil
}

// Verdict is the rule's answer about one command.
type Verdict struct {
	// Allowed: the command may run as sent.
	Allowed bool
	// Key is the key the refusal is about (nil for a command refused
	// whatever its keys: FLUSHALL, EVAL, …).
	Key []byte
	// Role is Key's role.
	Role Role
	// Reason says why, after the Prefix and the key.
	Reason string
}

// Reply is the refusal as an error text (Prefix first), "" when allowed.
func (v Verdict) Reply() string {
	if v.Allowed {
		return ""
	}
	if v.Key == nil {
		return Prefix + v.Reason + ` (docs/RESP.md, "The write rule")`
	}
	what := "an archived stream, bounded by echostore"
	if v.Role == Own {
		what = "echostore's own key"
	}
	return Prefix + strconv.Quote(string(v.Key)) + " is " + what + ": " + v.Reason + ` (docs/RESP.md, "The write rule")`
}

var allowed = Verdict{Allowed: true}

// keyspace are the commands that drop or replace keys wholesale, whatever
// keys they name: refused whatever the scope.
var keyspace = map[string]string{
	"flushall":  "FLUSHALL deletes every key",
	"flushdb":   "FLUSHDB deletes every key of the database",
	"swapdb":    "SWAPDB replaces every key of two databases",
	"debug":     "DEBUG can replace the dataset (RELOAD NOSAVE, LOADAOF) or change keys",
	"replicaof": "REPLICAOF host port replaces the dataset with another server's",
	"slaveof":   "SLAVEOF host port replaces the dataset with another server's",
}

// scripts run code that can change any key, whatever keys it names.
var scripts = set("eval", "evalsha", "fcall")

// readOnly are Redis's commands that change no key: the rule allows them
// whatever they name.
var readOnly = set(
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
	"ping", "echo", "select", "multi", "exec", "discard", "watch", "unwatch", "quit", "reset", "hello", "auth",
	"readonly", "readwrite", "asking", "time", "lastsave", "info", "role", "lolwut", "wait", "waitaof",
	"subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "pubsub",
)

// keyless are commands that name no key (their arguments are channels,
// scripts, settings, connections): the rule has nothing to check but
// CONFIG SET maxmemory-policy.
var keyless = set(
	"publish", "spublish", "script", "function", "config", "acl", "client", "cluster", "slowlog", "latency",
	"save", "bgsave", "bgrewriteaof", "shutdown", "failover", "module", "monitor", "sync", "psync",
)

// groupWork are the consumer-group commands that change no entry of a
// stream: deliveries, acknowledgements, claims (XGROUP is read by
// subcommand).
var groupWork = set("xreadgroup", "xack", "xclaim", "xautoclaim")

// Check decides whether the command args (args[0] its name, any case)
// may run for a caller of scope, given what keys are (keys may be nil:
// then no key is Bounded). It is the one write rule of every door to
// Redis; docs/RESP.md "The write rule" states it. In short:
//
//   - Commands that change no key run. FLUSHALL, FLUSHDB, SWAPDB, DEBUG,
//     REPLICAOF/SLAVEOF host port and scripts (EVAL, EVALSHA, FCALL: a
//     script can change any key) are refused, and so is CONFIG SET
//     maxmemory-policy to anything but noeviction (an evicting Redis
//     drops streams silently).
//   - XADD without a trim runs on any key but echostore's own keys that
//     are not a queue's stream emq:{Q}:stream:S (a job stream, dead
//     letters, lanes: only echostore's scripts write them). A trim (XADD's MAXLEN or MINID,
//     XTRIM) of a Bounded key runs only as MINID t with t at most the
//     successor of its watermark W (= or ~: it removes ids ≤ W alone, all
//     folded); MAXLEN, a MINID above, or any trim before the first fold
//     is refused. No trim of an Own key runs.
//   - Consumer-group work (XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XGROUP
//     CREATE|CREATECONSUMER|HELP) runs on any key; XGROUP DESTROY, SETID
//     and DELCONSUMER of a key under emq: (a job queue's stream) need the
//     admin scope.
//   - Any other command that names a Bounded or Own key among its
//     arguments (after its name; any position, so a value that is such a
//     key's name counts too) is refused: DEL, UNLINK, XDEL, XSETID,
//     RENAME, EXPIRE, SET, RESTORE, COPY, MOVE, SORT … STORE, *STORE, ….
//
// The scope lifts none of it but XGROUP's: admin may not trim or delete
// what the archive has not folded either (echostore archive delete does
// that). Check does not decide whether the scope may run the command at
// all (that is the caller's: resp's scopes). An error from keys is
// returned as it is; the caller refuses the command.
func Check(ctx context.Context, args [][]byte, scope Scope, keys Keys) (Verdict, error) {
	if len(args) == 0 {
		return allowed, nil
	}
	if v := CheckCommand(args); !v.Allowed {
		return v, nil
	}
	name := strings.ToLower(string(args[0]))
	switch {
	case readOnly[name], keyspace[name] != "", scripts[name], keyless[name], groupWork[name]:
		return allowed, nil
	case name == "xadd":
		return checkXAdd(ctx, args, keys)
	case name == "xtrim":
		return checkXTrim(ctx, args, keys)
	case name == "xgroup":
		return checkXGroup(ctx, args, scope, keys)
	}
	return checkArgs(ctx, name, args, keys)
}

// CheckCommand is the part of Check that needs neither the keys nor the
// scope: the commands refused whatever keys they name and whatever the
// token (FLUSHALL, FLUSHDB, SWAPDB, DEBUG, REPLICAOF host port, EVAL,
// EVALSHA, FCALL, CONFIG SET maxmemory-policy to an evicting policy). A
// caller may ask it before its scope check, so that such a command is
// refused by the rule's words for every token.
func CheckCommand(args [][]byte) Verdict {
	if len(args) == 0 {
		return allowed
	}
	name := strings.ToLower(string(args[0]))
	switch {
	case keyspace[name] != "":
		if (name == "replicaof" || name == "slaveof") && len(args) == 3 &&
			bytes.EqualFold(args[1], []byte("no")) && bytes.EqualFold(args[2], []byte("one")) {
			return allowed
		}
		return Verdict{Reason: strings.ToUpper(name) + " is refused through the front, whatever the token: " + keyspace[name] +
			", archived streams and echostore's own keys with them"}
	case scripts[name]:
		return Verdict{Reason: strings.ToUpper(name) + " is refused through the front, whatever the token: a script can change any key, " +
			"whatever keys it names, so no rule on its arguments can keep it from an archived stream (EVAL_RO, EVALSHA_RO and FCALL_RO run)"}
	case name == "config":
		return checkConfig(args)
	}
	return allowed
}

// checkConfig refuses CONFIG SET maxmemory-policy to an evicting policy.
func checkConfig(args [][]byte) Verdict {
	if len(args) < 2 || !bytes.EqualFold(args[1], []byte("set")) {
		return allowed
	}
	for i := 2; i+1 < len(args); i += 2 {
		if bytes.EqualFold(args[i], []byte("maxmemory-policy")) && !bytes.EqualFold(args[i+1], []byte("noeviction")) {
			return Verdict{Reason: "CONFIG SET maxmemory-policy " + strconv.Quote(string(args[i+1])) +
				" is refused through the front, whatever the token: an evicting Redis drops streams silently (only noeviction)"}
		}
	}
	return allowed
}

func checkXAdd(ctx context.Context, args [][]byte, keys Keys) (Verdict, error) {
	a, err := ParseXAdd(args)
	if err == nil && a.Strategy == NoTrim {
		return checkAppend(args[1]), nil
	}
	return checkTrim(ctx, "XADD", args, a.Trim, err, keys)
}

// checkAppend decides a plain XADD to key: it runs on any key but
// echostore's own keys that are not a queue's stream. An entry appended to
// a job stream, its dead letters, a lane or the outcome log's feed would be
// a job no enqueue accepted (no id checked, no outbox), a forged LSN
// announcement or a record of the kind only echostore's scripts write.
// No key is looked up (a plain append is the front's hot path): an
// archived stream is a queue's stream or an application's key, which
// never starts with emq:, so every other key under emq: is Own.
func checkAppend(key []byte) Verdict {
	if !bytes.HasPrefix(key, []byte(names.ReservedKeyPrefix)) || isQueueStream(key) {
		return allowed
	}
	return Verdict{Key: key, Role: Own, Reason: "XADD to it would put an entry there that only echostore writes " +
		"(a job no enqueue accepted, a lane's announcement): enqueue jobs through the HTTP API or the CLI; " +
		"a queue's streams (emq:{Q}:stream:S) take appends"}
}

// isQueueStream reports whether key is a queue's stream, emq:{Q}:stream:S
// with Q and S valid names (S holds no ':', so a stream's seam cache or
// lease is none).
func isQueueStream(key []byte) bool {
	rest, ok := bytes.CutPrefix(key, []byte(names.ReservedKeyPrefix+"{"))
	if !ok {
		return false
	}
	q, s, ok := bytes.Cut(rest, []byte("}:stream:"))
	if !ok {
		return false
	}
	_, err := names.ParseStreamRef(string(q), string(s))
	return err == nil
}

func checkXTrim(ctx context.Context, args [][]byte, keys Keys) (Verdict, error) {
	t, err := ParseXTrim(args)
	return checkTrim(ctx, "XTRIM", args, t, err, keys)
}

// checkTrim decides a trim (or a command that does not parse, perr) of
// args[1].
func checkTrim(ctx context.Context, cmd string, args [][]byte, t Trim, perr error, keys Keys) (Verdict, error) {
	if len(args) < 2 {
		return allowed, nil // Redis refuses it: no key
	}
	key := args[1]
	role, err := RoleOf(ctx, keys, key)
	if err != nil || role == Other {
		return allowed, err
	}
	v := Verdict{Key: key, Role: role}
	if perr != nil {
		v.Reason = cmd + "'s arguments are not ones Redis accepts (" + perr.Error() + "): refused rather than relayed"
		return v, nil
	}
	if role == Own {
		v.Reason = cmd + " with " + t.Strategy.String() + " would remove entries from it: only appends without a trim " +
			"and consumer-group work run on it, whatever the token"
		return v, nil
	}
	if t.Strategy == MaxLen {
		v.Reason = cmd + " with MAXLEN could remove entries above its watermark W, not folded yet (entries may land " +
			"between any read of W and the trim): trim with MINID at most W's successor"
		return v, nil
	}
	w, ok, err := keys.Watermark(ctx, key)
	if err != nil {
		return Verdict{}, err
	}
	if !ok {
		if t.MinID == (xid.ID{}) {
			return allowed, nil // MINID 0-0 removes nothing
		}
		v.Reason = cmd + " MINID " + t.MinID.String() + " would remove entries not folded yet: nothing is folded (no watermark W yet)"
		return v, nil
	}
	next, ok := w.Next()
	if !ok || t.MinID.Compare(next) <= 0 {
		return allowed, nil // removes ids below next: ids ≤ W alone
	}
	v.Reason = cmd + " MINID " + t.MinID.String() + " would remove entries above its watermark W = " + w.String() +
		", not folded yet: MINID at most " + next.String() + " removes folded entries only"
	return v, nil
}

// checkXGroup: XGROUP DESTROY, SETID and DELCONSUMER of a key under emq:
// need admin; the rest of XGROUP runs.
func checkXGroup(ctx context.Context, args [][]byte, scope Scope, keys Keys) (Verdict, error) {
	if len(args) < 3 {
		return allowed, nil
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "destroy", "setid", "delconsumer":
	default:
		return allowed, nil
	}
	key := args[2]
	if scope >= ScopeAdmin || !bytes.HasPrefix(key, []byte(names.ReservedKeyPrefix)) {
		return allowed, nil
	}
	role, err := RoleOf(ctx, keys, key)
	if err != nil {
		return Verdict{}, err
	}
	return Verdict{Key: key, Role: role, Reason: "XGROUP " + strings.ToUpper(sub) + " of a stream under emq: (a job queue's) " +
		"can drop or skip jobs not done yet: it needs the admin scope"}, nil
}

// checkArgs refuses a command that names a Bounded or Own key among its
// arguments: one Keys.Bounded each for the arguments outside emq: that can
// be a stream key (non-empty, at most names.MaxKeyLen bytes, each once).
func checkArgs(ctx context.Context, name string, args [][]byte, keys Keys) (Verdict, error) {
	reason := strings.ToUpper(name) + " could delete, overwrite, expire, move or rename it, or remove entries not folded yet; " +
		"only appends, trims at or below its watermark and consumer-group work run on it, whatever the token"
	for _, a := range args[1:] {
		if bytes.HasPrefix(a, []byte(names.ReservedKeyPrefix)) {
			role, err := RoleOf(ctx, keys, a) // the role words the reply only
			if err != nil {
				return Verdict{}, fmt.Errorf("is %q an archived stream: %w", a, err)
			}
			return Verdict{Key: a, Role: role, Reason: ownReason(name, role, reason)}, nil
		}
	}
	if keys == nil {
		return allowed, nil
	}
	for i, a := range args[1:] {
		if len(a) == 0 || len(a) > names.MaxKeyLen || seen(args[1:i+1], a) {
			continue
		}
		b, err := keys.Bounded(ctx, a)
		if err != nil {
			return Verdict{}, fmt.Errorf("is %q an archived stream: %w", a, err)
		}
		if b {
			return Verdict{Key: a, Role: Bounded, Reason: reason}, nil
		}
	}
	return allowed, nil
}

func ownReason(name string, role Role, bounded string) string {
	if role == Bounded {
		return bounded
	}
	return strings.ToUpper(name) + " could delete, overwrite, expire, move or rename it: only appends without a trim and " +
		"consumer-group work run on it, whatever the token"
}

func seen(before [][]byte, a []byte) bool {
	for _, b := range before {
		if bytes.Equal(a, b) {
			return true
		}
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
