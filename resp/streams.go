package resp

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// streamRead are the commands the front may answer itself for an archived
// stream.
var streamRead = set("xrange", "xrevrange", "xread", "xlen", "xinfo")

// errTooLarge: a reply the front builds passed Config.MaxReply.
var errTooLarge = errors.New("ERR echostore: the reply is larger than the front's limit (max_reply): give COUNT")

// streamCommand answers a stream read of an archived key. handled is false
// when the command is not about an archived stream (or is a form the front
// leaves to Redis): then it is relayed. A nil rep with handled true means
// the command was relayed to Redis to wait there (XREAD BLOCK on the live
// tail).
func (c *conn) streamCommand(ctx context.Context, name string, args [][]byte) (rep []byte, handled bool) {
	switch name {
	case "xrange", "xrevrange":
		return c.xrange(ctx, args, name == "xrevrange")
	case "xread":
		return c.xread(ctx, args)
	case "xlen":
		if len(args) != 2 {
			return nil, false
		}
		ref, ok, err := c.s.cfg.Lookup.Archived(ctx, args[1])
		if err != nil {
			return c.failed(err), true
		}
		if !ok {
			return nil, false
		}
		n, _, _, err := c.length(ctx, ref)
		if err != nil {
			return c.failed(err), true
		}
		return appendInt(nil, n), true
	case "xinfo":
		if len(args) != 3 || !bytes.EqualFold(args[1], []byte("stream")) {
			return nil, false // XINFO STREAM key FULL, GROUPS, CONSUMERS: Redis's
		}
		ref, ok, err := c.s.cfg.Lookup.Archived(ctx, args[2])
		if err != nil {
			return c.failed(err), true
		}
		if !ok {
			return nil, false
		}
		return c.xinfo(ctx, ref, args), true
	}
	return nil, false
}

// failed is the error reply of a failed archive read; the cause is logged.
func (c *conn) failed(err error) []byte {
	if errors.Is(err, errTooLarge) || errors.Is(err, errBadID) {
		return appendError(nil, err.Error())
	}
	c.s.log.Warn("resp: archived stream read failed", "err", err)
	return appendError(nil, "ERR echostore: "+err.Error())
}

// xrange answers XRANGE key start end [COUNT n] (XREVRANGE key end start).
func (c *conn) xrange(ctx context.Context, args [][]byte, reverse bool) ([]byte, bool) {
	if len(args) != 4 && len(args) != 6 {
		return nil, false // Redis's arity error
	}
	ref, ok, err := c.s.cfg.Lookup.Archived(ctx, args[1])
	if err != nil {
		return c.failed(err), true
	}
	if !ok {
		return nil, false
	}
	lo, hi := args[2], args[3]
	if reverse {
		lo, hi = hi, lo
	}
	count := -1
	if len(args) == 6 {
		if !bytes.EqualFold(args[4], []byte("count")) {
			return appendError(nil, "ERR syntax error"), true
		}
		n, err := strconv.ParseInt(string(args[5]), 10, 64)
		if err != nil {
			return appendError(nil, "ERR value is not an integer or out of range"), true
		}
		count = int(max(min(n, 1<<31), 0))
		if n < 0 {
			count = -1 // Redis: a negative COUNT is no COUNT
		}
	}
	start, ok1, err := bound(lo, false)
	if err != nil {
		return c.failed(err), true
	}
	end, ok2, err := bound(hi, true)
	if err != nil {
		return c.failed(err), true
	}
	if count == 0 {
		return appendNullArray(nil, c.proto), true // as Redis answers COUNT 0
	}
	if !ok1 || !ok2 {
		return appendArray(nil, 0), true
	}
	// The entries go after room for the array's header, which is written
	// in front of them once their number is known: no second copy.
	const room = 24
	body, n, err := c.entries(ctx, ref, spanOf(start, end), count, reverse, c.replyBuf(room))
	if err != nil {
		return c.failed(err), true
	}
	c.keepBuf(body)
	return withHeader(body, room, n), true
}

// maxKeptBuf bounds the reply buffer a connection keeps between commands.
const maxKeptBuf = 16 << 20

// replyBuf returns the connection's reply buffer, room bytes long.
func (c *conn) replyBuf(room int) []byte {
	if cap(c.big) < room {
		c.big = make([]byte, 0, 64<<10)
	}
	return c.big[:room]
}

// keepBuf keeps b's array for the next reply if it is not too large; the
// reply built in it is written before the next one is built.
func (c *conn) keepBuf(b []byte) {
	if cap(b) <= maxKeptBuf {
		c.big = b[:0]
	} else {
		c.big = nil
	}
}

// withHeader writes the array header of n elements just before b[room:]
// and returns the reply from there.
func withHeader(b []byte, room, n int) []byte {
	var h [24]byte
	hdr := appendArray(h[:0], n)
	start := room - len(hdr)
	copy(b[start:], hdr)
	return b[start:]
}

// entries appends the records of ref in sp (at most count, all if < 0) to
// b as Redis renders stream entries, and returns how many.
func (c *conn) entries(ctx context.Context, ref names.StreamRef, sp span, count int, reverse bool, b []byte) ([]byte, int, error) {
	if sp.empty || count == 0 {
		return b, 0, nil
	}
	n := 0
	opts := echostore.ReadOptions{From: sp.from, To: sp.to, Limit: max(count, 0), Reverse: reverse}
	if opts.To.IsZero() {
		// The zero To is xid.Max to Node.Read: the span holds the id 0-0
		// alone, the first record if it is that.
		opts.Limit, opts.Reverse = 1, false
	}
	recs := c.s.cfg.Archive.Read(ctx, ref, opts)
	if opts.Limit == 0 || opts.Limit >= aheadMin {
		recs = ahead(recs)
	}
	for rec, err := range recs {
		if err != nil {
			var ee *mq.EntryError
			if errors.As(err, &ee) {
				return b, n, errors.New("entry " + ee.XID + " of " + ee.Key + " is not a record the archive can serve")
			}
			return b, n, err
		}
		if sp.to.IsZero() && !rec.ID.IsZero() {
			break
		}
		b = appendEntry(b, rec)
		n++
		if len(b) > c.s.cfg.MaxReply {
			return b, n, errTooLarge
		}
	}
	return b, n, nil
}

// appendEntry appends one stream entry: [id, [name, value, …]].
func appendEntry(b []byte, rec echostore.Record) []byte {
	var idb [48]byte
	id := appendID(idb[:0], rec.ID)
	// One growth for the whole entry: 16 bytes cover a header's type,
	// length digits and CRLFs, and a bulk string's two CRLFs.
	need := 4 + 16 + len(id) + 16
	for _, f := range rec.Fields {
		need += 32 + len(f.Name) + len(f.Value)
	}
	b = slices.Grow(b, need)
	b = append(b, '*', '2', '\r', '\n')
	b = appendBulk(b, id)
	b = appendArray(b, 2*len(rec.Fields))
	for _, f := range rec.Fields {
		b = appendBulkString(b, f.Name)
		b = appendBulkString(b, f.Value)
	}
	return b
}

// xread answers XREAD [COUNT n] [BLOCK ms] STREAMS key… id… when one of the
// keys is archived: the archived keys' history through the merge-read,
// the others' through Redis, in the order of the keys. If none has an
// entry and BLOCK was given, the command waits in Redis on the live tail
// as it was sent (ids and $ as given: the archive holds nothing above
// them).
func (c *conn) xread(ctx context.Context, args [][]byte) ([]byte, bool) {
	count, block, keysAt := -1, false, -1
	for i := 1; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("count")) && i+1 < len(args):
			n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
			if err != nil {
				return nil, false
			}
			count = int(max(min(n, 1<<31), 0))
			if n <= 0 {
				count = -1
			}
			i++
		case bytes.EqualFold(args[i], []byte("block")) && i+1 < len(args):
			block = true
			i++
		case bytes.EqualFold(args[i], []byte("streams")):
			keysAt = i + 1
			i = len(args)
		default:
			return nil, false // Redis's syntax error
		}
	}
	if keysAt < 0 || (len(args)-keysAt)%2 != 0 || len(args) == keysAt {
		return nil, false
	}
	k := (len(args) - keysAt) / 2
	keys, ids := args[keysAt:keysAt+k], args[keysAt+k:]
	refs := make([]names.StreamRef, k)
	archived := make([]bool, k)
	any := false
	for i, key := range keys {
		ref, ok, err := c.s.cfg.Lookup.Archived(ctx, key)
		if err != nil {
			return c.failed(err), true
		}
		if ok && string(ids[i]) == "+" {
			return nil, false // the last entry: Redis's
		}
		refs[i], archived[i] = ref, ok
		any = any || ok
	}
	if !any {
		return nil, false
	}
	parts := make([][]byte, k) // each key's entries reply, nil if none
	live := map[string][]byte{}
	var liveKeys, liveIDs [][]byte
	for i := range keys {
		if !archived[i] {
			liveKeys, liveIDs = append(liveKeys, keys[i]), append(liveIDs, ids[i])
		}
	}
	if len(liveKeys) > 0 {
		var err error
		if live, err = c.liveRead(count, liveKeys, liveIDs); err != nil {
			return c.failed(err), true
		}
	}
	n, size, usedBig := 0, 0, false
	for i := range keys {
		if !archived[i] {
			parts[i] = live[string(keys[i])]
		} else if string(ids[i]) != "$" {
			sp, err := afterID(ids[i])
			if err != nil {
				return c.failed(err), true
			}
			const room = 24
			buf, mine := make([]byte, room, 64<<10), !usedBig
			if mine { // the first archived key's entries go in the connection's buffer
				buf, usedBig = c.replyBuf(room), true
			}
			body, m, err := c.entries(ctx, refs[i], sp, count, false, buf)
			if err != nil {
				return c.failed(err), true
			}
			if mine {
				c.keepBuf(body)
			}
			if m > 0 {
				parts[i] = withHeader(body, room, m)
			}
		}
		if parts[i] != nil {
			n++
			size += len(parts[i])
			if size > c.s.cfg.MaxReply {
				return c.failed(errTooLarge), true
			}
		}
	}
	if n == 0 {
		if block {
			return nil, false // wait in Redis: relayed as sent
		}
		return appendNullArray(nil, c.proto), true
	}
	// Written here piece by piece, the entries without a copy; the empty
	// reply returned says so.
	var out []byte
	if c.proto >= 3 {
		out = appendMap(out, c.proto, n)
	} else {
		out = appendArray(out, n) // of [key, entries] pairs
	}
	for i := range keys {
		if parts[i] == nil {
			continue
		}
		if c.proto < 3 {
			out = appendArray(out, 2)
		}
		out = appendBulk(out, keys[i])
		c.writeLocal(out)
		c.writeLocal(parts[i])
		out = out[:0]
	}
	return []byte{}, true
}

// liveRead runs XREAD [COUNT n] STREAMS keys… ids… in Redis (no BLOCK)
// and returns each key's entries reply as Redis sent it.
func (c *conn) liveRead(count int, keys, ids [][]byte) (map[string][]byte, error) {
	cmd := []string{"XREAD"}
	if count > 0 {
		cmd = append(cmd, "COUNT", strconv.Itoa(count))
	}
	cmd = append(cmd, "STREAMS")
	for _, k := range keys {
		cmd = append(cmd, string(k))
	}
	for _, id := range ids {
		cmd = append(cmd, string(id))
	}
	rep, err := c.roundTrip(appendCommand(nil, cmd...))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if len(rep) > 0 && rep[0] == '-' {
		return nil, errors.New(string(rep[1 : len(rep)-2]))
	}
	kind, elems, err := Elements(rep)
	if err != nil {
		return nil, err
	}
	switch kind {
	case '%':
		for i := 0; i+1 < len(elems); i += 2 {
			out[string(bulkBody(elems[i]))] = elems[i+1]
		}
	case '*':
		for _, e := range elems {
			_, kv, err := Elements(e)
			if err != nil || len(kv) != 2 {
				return nil, errors.New("unexpected XREAD reply from Redis")
			}
			out[string(bulkBody(kv[0]))] = kv[1]
		}
	}
	return out, nil
}

// roundTrip sends one command of the front's own on the upstream
// connection and reads its reply (nothing relayed is pending).
func (c *conn) roundTrip(cmd []byte) ([]byte, error) {
	if _, err := c.uw.Write(cmd); err != nil {
		return nil, err
	}
	if err := c.uw.Flush(); err != nil {
		return nil, err
	}
	return ReadReply(c.ur, nil)
}

// length is XLEN of an archived stream: the records a full XRANGE returns,
// the archive's retained records and the live entries above its watermark.
// It also returns the watermark (0 and false before the first fold) and
// the archive's retained count.
func (c *conn) length(ctx context.Context, ref names.StreamRef) (n int64, w xid.ID, retained uint64, err error) {
	st, err := c.s.cfg.Archive.Status(ctx, ref)
	if err != nil {
		return 0, xid.ID{}, 0, err
	}
	retained = st.Archived
	if st.Retained != nil {
		retained = *st.Retained
	}
	if st.Watermark == nil {
		return st.Live, xid.ID{}, retained, nil
	}
	if w, err = parseWatermark(ref, *st.Watermark); err != nil {
		return 0, xid.ID{}, 0, err
	}
	// Entries at or below W stay live only while a consumer group holds
	// them: few; they are counted once.
	var below int64
	for _, err := range c.s.cfg.Archive.Read(ctx, ref, echostore.ReadOptions{To: w, Side: echostore.ReadLiveOnly}) {
		var ee *mq.EntryError
		if err != nil && !errors.As(err, &ee) {
			return 0, xid.ID{}, 0, err
		}
		below++
	}
	return int64(retained) + st.Live - below, w, retained, nil
}

// xinfo answers XINFO STREAM key of an archived stream: Redis's reply with
// length the merged count (XLEN), first-entry the oldest retained record
// (from the archive), last-entry the newest record, and three fields of
// echostore's: echostore-archived (retained archived records),
// echostore-watermark (the newest archived id, or null) and
// echostore-live-length (Redis's own length).
func (c *conn) xinfo(ctx context.Context, ref names.StreamRef, args [][]byte) []byte {
	rep, err := c.roundTrip(appendCommand(nil, "XINFO", "STREAM", string(args[2])))
	if err != nil {
		return c.failed(err)
	}
	if len(rep) > 0 && rep[0] == '-' {
		return rep
	}
	_, elems, err := Elements(rep)
	if err != nil {
		return c.failed(err)
	}
	n, w, retained, err := c.length(ctx, ref)
	if err != nil {
		return c.failed(err)
	}
	edge := func(reverse bool) []byte {
		body, m, err := c.entries(ctx, ref, span{from: xid.Min, to: xid.Max}, 1, reverse, nil)
		if err != nil || m == 0 {
			return appendNull(nil, c.proto)
		}
		return body
	}
	var liveLen []byte
	out := appendMap(nil, c.proto, len(elems)/2+3)
	for i := 0; i+1 < len(elems); i += 2 {
		key, val := elems[i], elems[i+1]
		switch string(bulkBody(key)) {
		case "length":
			liveLen = val
			val = appendInt(nil, n)
		case "first-entry":
			val = edge(false)
		case "last-entry":
			val = edge(true)
		}
		out = append(out, key...)
		out = append(out, val...)
	}
	if liveLen == nil {
		liveLen = appendInt(nil, 0)
	}
	out = appendBulkString(out, "echostore-archived")
	out = appendInt(out, int64(retained))
	out = appendBulkString(out, "echostore-watermark")
	if w.IsZero() {
		out = appendNull(out, c.proto)
	} else {
		out = appendBulkString(out, idText(w))
	}
	out = appendBulkString(out, "echostore-live-length")
	out = append(out, liveLen...)
	return out
}
