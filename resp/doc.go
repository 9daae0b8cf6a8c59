// Package resp is echostore's Redis-protocol front (`echostore serve
// --resp ADDR`, docs/RESP.md): it answers RESP2 and RESP3 (HELLO) on a
// listener, serves the reads of archived streams (XRANGE, XREVRANGE,
// XREAD, XLEN, XINFO STREAM) as archive ∪ live tail through the node's
// merge-read, and relays every other command to Redis unchanged, on one
// dedicated upstream connection per client connection.
//
// # What it owns
//
//   - Server: the accept loop and one goroutine per client connection,
//     with its upstream connection (Upstream: dialled, authenticated with
//     Redis's password and on its database before the client's first
//     command reaches it). Close ends them all.
//   - The connection's state as the front needs it: the protocol (2 or 3,
//     from HELLO's reply), the selected database, whether a MULTI is open,
//     the identity and scope of its token, and relay mode while it is
//     subscribed.
//   - The scope each command needs (Scope; needs in commands.go), and the
//     commands it refuses to relay (MONITOR, SYNC, PSYNC, CLIENT REPLY).
//   - Asking the write rule (package writerule) about every command,
//     whatever the token (rule.go): its Lookup answers the rule's Keys
//     (archived? and, through Watermarks, the watermark W), and a refused
//     command inside MULTI dooms the transaction (EXEC answers
//     EXECABORT, as Redis's own refusal of a queued command does).
//   - ReadReply and Elements: a RESP2 and RESP3 reply reader that keeps
//     each reply's bytes (fuzzed), for Redis's replies.
//   - The one conversion between record ids and Redis ids (id.go).
//
// # Promises
//
//   - Replies relayed from Redis reach the client byte for byte and in
//     order; the commands' bytes reach Redis as the client sent them.
//   - An archived stream's reply is byte for byte the reply Redis gave for
//     the same command before its records were archived.
//   - With Config.Authenticate set, nothing but AUTH, HELLO … AUTH, QUIT
//     and RESET runs before a token is given, and nothing beyond its
//     token's scope after; no token or password is ever logged.
//   - Nothing the write rule refuses reaches Redis, with any token or none:
//     no trim past an archived stream's watermark, no delete, overwrite,
//     expiry or rename of it or of echostore's own keys, no script, no
//     FLUSHALL (docs/RESP.md, "The write rule").
//   - Inside MULTI, while subscribed, and in a database other than
//     Upstream.DB, every command the write rule lets through is relayed
//     (live data only).
//
// Client commands are parsed by github.com/tidwall/redcon's Reader; the
// lookup of archived keys is the Lookup interface (StreamLookup for
// emq:{Q}:stream:S and for stream keys registered in emq:{T}:archived-keys;
// QueueLookup for the former alone), and archived reads go through the
// Archive interface (*echostore.Node).
package resp
