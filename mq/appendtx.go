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
	key := StreamKey(ref)
	set, member := ArchivedRegistry(ref)
	scratch := appendScratchOf(ref)
	b := c.rdb.B()
	cmds := make(rueidis.Commands, 0, len(recs)+4)
	cmds = append(cmds, b.Multi().Build(),
		b.Eval().Script(scriptAppendGuard).Numkeys(4).Key(key, set, DirtyOf(ref), scratch).
			Arg(member, ids[0].RedisID(), ids[len(ids)-1].RedisID()).Build())
	for i, r := range recs {
		x := b.Xadd().Key(key).Id(ids[i].RedisID()).FieldValue()
		for _, f := range r {
			x = x.FieldValue(f.Name, f.Value)
		}
		cmds = append(cmds, x.Build())
	}
	cmds = append(cmds, b.Eval().Script(scriptAppendRestore).Numkeys(2).Key(key, scratch).Build(), b.Exec().Build())
	res := c.rdb.DoMulti(ctx, cmds...)
	return txOutcome(ids, res)
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
