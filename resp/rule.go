package resp

import (
	"bytes"
	"context"
	"errors"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/writerule"
	"github.com/echostore/echostore/xid"
)

// errNoWatermarks: the front's Lookup cannot tell an archived stream's
// watermark (it is no Watermarks), so no trim of one can be shown safe.
var errNoWatermarks = errors.New("the lookup knows no watermarks")

// ruleKeys is the front's Lookup as the write rule asks it
// (writerule.Keys): Bounded is Lookup.Archived, Watermark the Lookup's
// Watermarks of the stream Bounded found.
type ruleKeys struct {
	l   Lookup
	key []byte // the last key Bounded found archived
	ref names.StreamRef
}

// Bounded implements writerule.Keys.
func (k *ruleKeys) Bounded(ctx context.Context, key []byte) (bool, error) {
	if k.l == nil {
		return false, nil
	}
	ref, ok, err := k.l.Archived(ctx, key)
	if err != nil {
		return false, err
	}
	if ok {
		k.key, k.ref = key, ref
	}
	return ok, nil
}

// Watermark implements writerule.Keys.
func (k *ruleKeys) Watermark(ctx context.Context, key []byte) (xid.ID, bool, error) {
	wm, ok := k.l.(Watermarks)
	if !ok {
		return xid.ID{}, false, errNoWatermarks
	}
	if k.key == nil || !bytes.Equal(key, k.key) {
		if ok, err := k.Bounded(ctx, key); err != nil || !ok {
			return xid.ID{}, false, err
		}
	}
	return wm.Watermark(ctx, k.ref)
}

// checkRule returns the error reply of a command the write rule refuses
// (writerule.Check: for every token, admin's too), or of one it cannot
// decide because a lookup failed; nil when the command may run. Read
// commands are not asked about.
func (c *conn) checkRule(ctx context.Context, name string, args [][]byte) []byte {
	if readCommands[name] {
		return nil
	}
	v, err := writerule.Check(ctx, args, writerule.Scope(c.id.Scope), &ruleKeys{l: c.s.cfg.Lookup})
	if err != nil {
		c.s.log.Warn("resp: the write rule could not look a key up", "err", err)
		return appendError(nil, "ERR echostore: cannot tell whether the command changes an archived stream: "+err.Error())
	}
	if !v.Allowed {
		return appendError(nil, v.Reply())
	}
	return nil
}

// checkCommand returns the error reply of a command the write rule
// refuses whatever its keys and the token (writerule.CheckCommand:
// FLUSHALL, EVAL, …), asked before the scope check.
func (c *conn) checkCommand(args [][]byte) []byte {
	if v := writerule.CheckCommand(args); !v.Allowed {
		return appendError(nil, v.Reply())
	}
	return nil
}
