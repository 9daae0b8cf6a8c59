// Package writerule is echostore's one rule for what a Redis command sent
// by a client may change: Check decides, from the command's arguments, the
// role of the keys it names (Role: an archived stream, Bounded; a key of
// echostore's own under emq:, Own; any other key) and the caller's scope,
// whether it runs. The RESP front (package resp, `echostore serve --resp`)
// asks it about every command a client sends it, inside MULTI and while
// subscribed too; the HTTP API and the CLI write through package mq and
// archive, whose own scripts keep the same limits, and may ask it about a
// command they relay.
//
// # Why
//
// An archived stream keeps its entries above the watermark W (the newest
// archived id) in Redis alone until a cycle folds them. A trim, a delete,
// an overwrite, an expiry or a rename of the stream key that reaches
// past W loses records that were acknowledged; the same on echostore's own
// keys (a job stream, a seam cache, a registry) loses jobs or makes the
// archive misread. No token scope lifts the rule (admin neither: echostore
// archive delete is the way to drop an archive): see Check.
//
// # What it owns
//
//   - Check, the rule, and the Verdict whose Reply is the refusal, an error
//     text starting with Prefix (NOPERM echostore: …).
//   - ParseXAdd and ParseXTrim: XADD's and XTRIM's options read by Redis's
//     own grammar (any order, repeats, C-string keywords, Redis's number
//     and id parsing), so that the rule sees the trim Redis would make.
//     FuzzXTrimGrammar checks them against a real redis-server.
//   - Keys, what the rule asks about keys (resp's Lookup answers it: one
//     SISMEMBER for whether a key is archived, one HGETALL of the seam
//     cache for W, asked only for a trim of an archived stream).
//
// It owns no state and sends nothing to Redis itself.
package writerule
