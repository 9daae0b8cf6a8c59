package mq

import (
	"context"
	"errors"
	"fmt"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/redis/rueidis"
)

// appendTx sends a chunk's first send as one transaction of native
// commands and returns its outcome in scriptAppend's words: {"OK"} when the
// chunk was appended, {"TOP", last id} when its first id is not above the
// stream's last id (nothing appended: re-mint above it).
//
// The transaction is MULTI, scriptAppendGuard, the chunk's XADDs with their
// ids, scriptAppendRestore, EXEC, sent in one round trip. Redis runs it
// whole, with no other client's command in between (no WATCH is needed,
// and none would do: XSETID does not touch a watched key): the guard checks
// the stream's last id and marks an archived stream dirty, and when the
// chunk is not above the last id it makes every XADD fail and the restore
// leaves the stream as it was. The per-record cost is Redis's XADD alone,
// where scriptAppend adds Lua's redis.call to each record
// (docs/BENCHMARKS.md).
//
// A transaction Redis refuses whole (EXECABORT: a command refused while
// queued, LOADING among them) ran nothing: the error is returned, a LOADING
// one when any queued command was refused with LOADING. A reply lost on
// the way is an error that is not a server error: the caller retries
// through scriptAppend, which tells whether the chunk landed.
func (c *Client) appendTx(ctx context.Context, ref names.StreamRef, ids []brand.ID, recs [][]Field) ([]string, error) {
	res := c.rdb.DoMulti(ctx, c.txCommands(nil, ref, brand.RedisIDs(ids), recs, "")...)
	return txOutcome(ids, res)
}

// txCommands appends to cmds the append transaction of one chunk (ids,
// the Redis ids of recs): MULTI, the guard, the XADDs, the restore, EXEC.
// A non-empty after is the last id of the chunk sent before it in the same
// pipeline: the guard then also requires the stream to end there (that
// chunk landed).
func (c *Client) txCommands(cmds rueidis.Commands, ref names.StreamRef, ids []string, recs [][]Field, after string) rueidis.Commands {
	key := StreamKey(ref)
	set, member := ArchivedRegistry(ref)
	scratch := appendScratchOf(ref)
	b := c.rdb.B()
	if cmds == nil {
		cmds = make(rueidis.Commands, 0, len(recs)+4)
	}
	args := []string{member, ids[0], ids[len(ids)-1]}
	if after != "" {
		args = append(args, after)
	}
	cmds = append(cmds, b.Multi().Build(),
		b.Eval().Script(scriptAppendGuard).Numkeys(4).Key(key, set, DirtyOf(ref), scratch).Arg(args...).Build())
	for i, r := range recs {
		x := b.Xadd().Key(key).Id(ids[i]).FieldValue()
		for _, f := range r {
			x = x.FieldValue(f.Name, f.Value)
		}
		cmds = append(cmds, x.Build())
	}
	return append(cmds, b.Eval().Script(scriptAppendRestore).Numkeys(2).Key(key, scratch).Build(), b.Exec().Build())
}

// errTxSplit is the cause of an unknown outcome of an append transaction
// whose XADDs did not all fail or all succeed, or that Redis ran outside a
// transaction: it should not happen.
var errTxSplit = errors.New("append transaction: the chunk's XADDs did not all succeed or all fail")

// txOutcome reads the replies of appendTx's commands.
func txOutcome(ids []brand.ID, res []rueidis.RedisResult) ([]string, error) {
	n := len(res) - 4 // the XADDs
	if err := res[0].Error(); err != nil {
		if !isServerError(err) {
			return nil, err // lost: the transaction may have run
		}
		// MULTI refused: every command after it was refused too (a proxy
		// answering LOADING for each) or ran on its own.
		for _, r := range res[1:] {
			if e := r.Error(); !isLoading(e) {
				return nil, &unknownOutcome{ids: ids, cause: fmt.Errorf("%w: MULTI refused (%v), then %v", errTxSplit, err, e)}
			}
		}
		return nil, err
	}
	exec := res[len(res)-1]
	arr, err := exec.ToArray()
	if err != nil {
		if isServerError(err) {
			// EXECABORT (or LOADING, EXEC itself refused): nothing ran.
			for _, r := range res[1 : len(res)-1] {
				if e := r.Error(); isLoading(e) {
					return nil, e
				}
			}
		}
		return nil, err
	}
	if len(arr) != n+2 {
		return nil, &unknownOutcome{ids: ids, cause: fmt.Errorf("%w: EXEC replied %d results for %d commands", errTxSplit, len(arr), n+2)}
	}
	failed := 0
	var xerr error
	for i := 1; i <= n; i++ {
		if e := arr[i].Error(); e != nil {
			failed++
			xerr = e
		}
	}
	if e := arr[n+1].Error(); e != nil {
		// The stream's last id may be left raised; nothing was appended
		// if the guard said TOP, and the XADDs' replies say which.
		if failed == n {
			return nil, fmt.Errorf("append restore: %w", e)
		}
		return nil, &unknownOutcome{ids: ids, cause: fmt.Errorf("%w: restore failed: %v", errTxSplit, e)}
	}
	guard, gerr := arr[0].AsStrSlice()
	switch {
	case gerr == nil && len(guard) == 1 && guard[0] == "OK" && failed == 0:
		return guard, nil
	case gerr == nil && len(guard) == 2 && guard[0] == "TOP" && failed == n:
		return guard, nil
	case gerr != nil && failed == n:
		return nil, fmt.Errorf("append guard: %w", gerr) // nothing appended
	}
	return nil, &unknownOutcome{ids: ids, cause: fmt.Errorf("%w: guard %q (%v), %d of %d failed (%v)", errTxSplit, guard, gerr, failed, n, xerr)}
}

// maxPipeChunks is the most chunks of one batch that AppendBatch sends in
// one pipeline of append transactions: Redis appends a chunk while the
// next ones are on their way, instead of waiting a round trip per chunk.
const maxPipeChunks = 8

// appendPipelined appends the chunks [start, ends[0]), [ends[0], ends[1]),
// … of records (two or more) as one pipeline of append transactions
// (txCommands), each chunk's guard requiring the stream to end at the
// chunk before it: chunks land in order, and one that did not land makes
// every one after it fail too (other clients' commands may run between
// the transactions, never inside one). It returns ids with the ids of the
// chunks that landed appended, and the first record not yet appended.
//
// What stops the pipeline is resolved one chunk at a time, and the caller
// sends the rest: a chunk not above the stream's last id (another
// producer appended first) is re-minted above it and sent again
// (appendChunkIDs); one that ran nothing (a refused transaction) is sent
// again as it was; for one whose reply was lost, it and each one after it
// are sent again with their ids as a retry, which tells one that landed,
// for as long as each turns out to have landed as sent.
func (c *Client) appendPipelined(ctx context.Context, ref names.StreamRef, records [][]Field, start int, ends []int, ids []brand.ID) ([]brand.ID, int, error) {
	minted := make([]brand.ID, ends[len(ends)-1]-start)
	if err := c.mint(minted, 0); err != nil {
		return ids, start, err
	}
	starts := chunkStarts(start, ends)
	rids := brand.RedisIDs(minted)
	cmds := make(rueidis.Commands, 0, len(minted)+5*len(ends))
	after := ""
	for k, lo := range starts {
		cids := rids[lo-start : ends[k]-start]
		cmds = c.txCommands(cmds, ref, cids, records[lo:ends[k]], after)
		after = cids[len(cids)-1]
	}
	res := c.rdb.DoMulti(ctx, cmds...)
	at := 0 // the first reply of chunk k
	for k, lo := range starts {
		e := ends[k]
		cids := minted[lo-start : e-start]
		n := e - lo + 4
		reply, err := txOutcome(cids, res[at:at+n])
		at += n
		var unknown *unknownOutcome
		switch {
		case err == nil && reply[0] == "OK":
			c.stats.chunks.Add(1)
			ids = append(ids, cids...)
			continue
		case err == nil: // {"TOP", last id}
			top, err := brandedFloor(reply[1])
			if err != nil {
				return ids, lo, fmt.Errorf("stream top %s: %w", reply[1], err)
			}
			c.stats.remints.Add(1)
			if err := c.mint(cids, top); err != nil {
				return ids, lo, err
			}
			fallthrough
		case isServerError(err) && !errors.As(err, &unknown): // nothing ran
			got, _, err := c.appendChunkIDs(ctx, ref, records[lo:e], cids, false)
			ids = append(ids, got...)
			if err != nil {
				return ids, lo, err
			}
			return ids, e, nil
		case errors.As(err, &unknown):
			return ids, lo, err
		}
		// The reply was lost: this chunk, and each after it while the one
		// before it landed, may have landed.
		for j := k; j < len(ends); j++ {
			lo, e := starts[j], ends[j]
			cids := minted[lo-start : e-start]
			got, asSent, err := c.appendChunkIDs(ctx, ref, records[lo:e], cids, true)
			ids = append(ids, got...)
			if err != nil {
				return ids, lo, err
			}
			if !asSent {
				return ids, e, nil // it was not there: neither is any after it
			}
		}
		return ids, ends[len(ends)-1], nil
	}
	return ids, ends[len(ends)-1], nil
}

// chunkStarts returns the start of each chunk of [start, ends[last]) that
// ends at ends.
func chunkStarts(start int, ends []int) []int {
	starts := make([]int, len(ends))
	for k := range ends {
		starts[k] = start
		start = ends[k]
	}
	return starts
}
