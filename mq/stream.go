package mq

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
	"github.com/redis/rueidis"
)

// AppendError reports an append that did not complete. Appended holds the
// ids of the records of the batch that are in the stream (a prefix of the
// batch, in order); Unknown the ids of the chunk whose outcome is not known
// (with ErrOutcomeUnknown): those records are in the stream under exactly
// these ids, or not at all.
type AppendError struct {
	Queue, Stream string     // where the batch went ("" for a key stream)
	Key           string     // the key stream's Redis key ("" for a queue's stream)
	Appended      []brand.ID // ids of the records that are in the stream
	Unknown       []brand.ID // ids of the chunk whose outcome is unknown
	Err           error      // the cause
}

func (e *AppendError) Error() string {
	where := "stream " + e.Queue + "/" + e.Stream
	if e.Key != "" {
		where = fmt.Sprintf("stream at key %q", clip(e.Key))
	}
	msg := fmt.Sprintf("append to %s: %v", where, e.Err)
	if len(e.Appended) > 0 {
		msg += fmt.Sprintf(" (%d records of the batch were appended before)", len(e.Appended))
	}
	if len(e.Unknown) > 0 {
		msg += fmt.Sprintf(" (check whether %s… is in the stream)", brand.EVT.Format(e.Unknown[0]))
	}
	return msg
}

func (e *AppendError) Unwrap() error { return e.Err }

// Append appends one record to stream s of queue q and returns its id.
// Concurrent Appends to one stream from one Client share script calls: the
// records waiting when a chunk goes out go in it, in arrival order (see
// AppendBatch for what a chunk promises). If ctx ends while the record
// waits, it is not appended; once its chunk is in flight, Append waits for
// the chunk's outcome.
func (c *Client) Append(ctx context.Context, ref names.StreamRef, fields ...Field) (brand.ID, error) {
	if err := checkRef(ref); err != nil {
		return 0, err
	}
	if err := c.opts.Limits.Check(fields); err != nil {
		return 0, fmt.Errorf("append to %s: %w", where(ref), err)
	}
	id, err := c.appendOne(ctx, ref, fields)
	if err != nil {
		return 0, appendError(ref, nil, c.typeError(ctx, err, StreamKey(ref)))
	}
	return id, nil
}

// appendError wraps a failed chunk into an *AppendError.
func appendError(ref names.StreamRef, appended []brand.ID, err error) error {
	ae := &AppendError{Queue: ref.Queue().String(), Stream: ref.Stream().String(), Appended: appended, Err: err}
	if k, ok := ref.Key(); ok {
		ae.Key = k.String()
	}
	var unknown *unknownOutcome
	if errors.As(err, &unknown) {
		ae.Unknown = unknown.ids
	}
	return ae
}

// AppendBatch appends records in order and returns their ids, in order.
//
// Every record is checked before anything is sent: one invalid record fails
// the batch with a *RecordError (its Index says which) and nothing is
// appended. The batch goes in chunks (Options.ChunkRecords, ChunkBytes),
// each one server-side script call that appends the whole chunk or none of
// it. Each record's id is minted here and XADD uses its Redis id, so stream
// order is mint order (invariant 1). A chunk whose first id is not above the
// stream's top (another producer appended first) is re-minted above the top
// and sent again; a chunk whose reply was lost is sent again with the same
// ids, and counts as appended if it had landed, so no record is appended
// twice. If a later chunk fails, the error is an *AppendError whose
// Appended lists what did land. With transactions (the default), up to
// maxPipeChunks chunks go in one round trip, each landing only on the one
// before it (appendPipelined): the batch's order holds whatever stops it.
func (c *Client) AppendBatch(ctx context.Context, ref names.StreamRef, records [][]Field) ([]brand.ID, error) {
	return c.appendBatch(ctx, ref, records, c.opts.Limits.Check)
}

// AppendBytes is AppendBatch for records of any bytes, as Redis stores
// them: names and values need not be UTF-8 and names may repeat (the pair
// form of append input, ParseInputLine). Records are checked against the
// limits only (Limits.CheckSize): at least one field, at most MaxFields
// fields and MaxBytes bytes.
func (c *Client) AppendBytes(ctx context.Context, ref names.StreamRef, records [][]Field) ([]brand.ID, error) {
	return c.appendBatch(ctx, ref, records, c.opts.Limits.CheckSize)
}

// appendBatch is AppendBatch with check as the rule of a record.
func (c *Client) appendBatch(ctx context.Context, ref names.StreamRef, records [][]Field, check func([]Field) error) ([]brand.ID, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	for i, rec := range records {
		if err := check(rec); err != nil {
			var re *RecordError
			if errors.As(err, &re) {
				re.Index = i
			}
			return nil, fmt.Errorf("append to %s: %w", where(ref), err)
		}
	}
	key := StreamKey(ref)
	slot := c.slot(key)
	ids := make([]brand.ID, 0, len(records))
	fields := func(i int) []Field { return records[i] }
	for start := 0; start < len(records); {
		var ends []int // the chunks sent next: one, or a pipeline of them
		for e := start; e < len(records) && len(ends) < maxPipeChunks; {
			e = c.chunkEnd(len(records), e, fields)
			ends = append(ends, e)
			if !c.tx {
				break
			}
		}
		if err := slot.acquire(ctx); err != nil {
			return ids, appendError(ref, ids, err)
		}
		var err error
		if len(ends) == 1 {
			var got []brand.ID
			got, err = c.appendChunk(ctx, ref, records[start:ends[0]])
			ids = append(ids, got...)
			start = ends[0]
		} else {
			ids, start, err = c.appendPipelined(ctx, ref, records, start, ends, ids)
		}
		slot.release()
		if err != nil {
			return ids, appendError(ref, ids, c.typeError(ctx, err, key))
		}
	}
	return ids, nil
}

// chunkEnd returns the end of the chunk of items 0..n-1 (records or jobs,
// item i holding fields(i)) that starts at item start: at most
// Options.ChunkRecords items and ChunkBytes bytes, counting 16 bytes of
// framing per field, and at least one item.
func (c *Client) chunkEnd(n, start int, fields func(i int) []Field) int {
	bytes := 0
	for i := start; i < n; i++ {
		fs := fields(i)
		b := api.FieldsSize(fs) + 16*len(fs)
		if i > start && (i-start >= c.opts.ChunkRecords || bytes+b > c.opts.ChunkBytes) {
			return i
		}
		bytes += b
	}
	return n
}

// unknownOutcome is the cause of an ErrOutcomeUnknown append error.
type unknownOutcome struct {
	ids   []brand.ID
	cause error
}

func (u *unknownOutcome) Error() string {
	return fmt.Sprintf("%v after %v", ErrOutcomeUnknown, u.cause)
}

func (u *unknownOutcome) Unwrap() []error { return []error{ErrOutcomeUnknown, u.cause} }

// errTrimmedSince is the cause of an unknown outcome whose retry found
// none of the chunk where it would be, with the stream trimmed or deleted
// from since.
var errTrimmedSince = errors.New("the chunk is not in the stream, and the stream was trimmed (or entries deleted) where it would be since its reply was lost")

// maxRemints bounds how often one chunk is re-minted; each re-mint means
// another producer appended in between, so reaching it means a stream
// appended to without pause by other producers faster than this one.
const maxRemints = 1000

// defaultTxMinRecords is the fewest records of a chunk whose first send goes
// as a transaction: the transaction's two script calls cost Redis more than
// the append script's per-record overhead saves on smaller chunks (even at
// 16 records; a single record takes about 1.5× the time;
// BenchmarkChunkPath, docs/BENCHMARKS.md).
const defaultTxMinRecords = 16

// appendChunk appends one chunk and returns its ids. A first send of a
// chunk of defaultTxMinRecords or more goes as one transaction of native
// XADDs (appendTx), a smaller one through scriptAppend (as every chunk does
// when the client has no transactions, Options.ScriptAppend); a send after a lost
// reply goes through scriptAppend with retry set, which tells a chunk that
// landed (see its protocol; both paths append a chunk whole or not at all,
// under ids no one else mints). Either adds an archived stream to its
// slot's change feed (DirtySetKey) in the same atomic step.
func (c *Client) appendChunk(ctx context.Context, ref names.StreamRef, recs [][]Field) ([]brand.ID, error) {
	ids := make([]brand.ID, len(recs))
	if err := c.mint(ids, 0); err != nil {
		return nil, err
	}
	got, _, err := c.appendChunkIDs(ctx, ref, recs, ids, false)
	return got, err
}

// appendChunkIDs is appendChunk with the chunk's first ids minted by the
// caller; lost says that a send of the chunk under those ids got no reply
// (it may have landed), so the first call is a retry. asSent reports that
// the chunk is in the stream under ids as given (it landed, now or on that
// lost send), not re-minted.
func (c *Client) appendChunkIDs(ctx context.Context, ref names.StreamRef, recs [][]Field, ids []brand.ID, lost bool) (got []brand.ID, asSent bool, err error) {
	key := StreamKey(ref)
	set, member := ArchivedRegistry(ref)
	keys := []string{key, set, DirtyOf(ref)}
	remints := 0
	for {
		reply, err := c.execChunk(ctx, "append", key, ids, lost, func(retry bool) ([]string, error) {
			if c.tx && !retry && len(recs) >= c.txMin {
				return c.appendTx(ctx, ref, ids, recs)
			}
			args := appendArgs(retry, ids, recs)
			args = append(args[:1], append([]string{member}, args[1:]...)...)
			return c.lua.append.Exec(ctx, c.rdb, keys, args).AsStrSlice()
		})
		lost = false
		if err != nil {
			return nil, false, err
		}
		switch {
		case len(reply) >= 1 && (reply[0] == "OK" || reply[0] == "LANDED"):
			c.stats.chunks.Add(1)
			return ids, remints == 0, nil
		case len(reply) == 1 && reply[0] == "UNKNOWN":
			// Only a retry answers this: the lost call may have landed and
			// been trimmed since. Re-minting could append it twice.
			return nil, false, &unknownOutcome{ids: ids, cause: errTrimmedSince}
		case len(reply) == 2 && reply[0] == "TOP":
			// Not appended (on a retry: the script proved the lost call
			// had not landed either, and it can no longer land, being
			// below the top).
			top, err := brandedFloor(reply[1])
			if err != nil {
				return nil, false, fmt.Errorf("stream top %s: %w", reply[1], err)
			}
			if remints++; remints > maxRemints {
				return nil, false, fmt.Errorf("re-minted %d times above a moving top; giving up", maxRemints)
			}
			c.stats.remints.Add(1)
			if err := c.mint(ids, top); err != nil {
				return nil, false, err
			}
		default:
			return nil, false, fmt.Errorf("append script: unexpected reply %q", reply)
		}
	}
}

// execChunk runs the script call of a chunk whose jobs or records have ids
// and returns its reply. A call that gets no reply (the chunk may or may not
// have run), and one that a server still loading its dataset refuses with
// LOADING (a restarted server: it ran nothing and will serve once loaded),
// is made again up to Options.AppendRetries times after a pause of
// RetryBackoff doubling each time; retry is set on the calls after a lost
// reply, so the script must tell (or make harmless) a chunk that had run.
// lost says that a send of the chunk before this call got no reply.
// Once a reply was lost, a failure (retries spent, ctx ended, or another
// error reply) is an *unknownOutcome naming ids; before, nothing ran and the
// failure is the error itself.
func (c *Client) execChunk(ctx context.Context, what, key string, ids []brand.ID, lost bool, call func(retry bool) ([]string, error)) ([]string, error) {
	// lost: a call got no reply, it may have run (given: an earlier send
	// of the chunk, in a pipeline, got none)
	for tries := 0; ; {
		reply, err := call(lost)
		var unknown *unknownOutcome
		switch {
		case err == nil:
			return reply, nil
		case errors.As(err, &unknown):
			return nil, err
		case isLoading(err): // nothing ran
		case isServerError(err):
			return nil, chunkFailure(what, ids, lost, err)
		default:
			lost = true
		}
		if tries++; ctx.Err() != nil || tries > c.opts.AppendRetries {
			return nil, chunkFailure(what, ids, lost, err)
		}
		c.stats.retries.Add(1)
		c.log.Warn(what+" not answered (reply lost, or the server is loading its data); retrying with the same ids",
			"key", key, "attempt", tries, "err", err)
		if err := sleep(ctx, c.opts.RetryBackoff<<(tries-1)); err != nil {
			return nil, chunkFailure(what, ids, lost, err)
		}
	}
}

// chunkFailure is the error of a chunk that failed with err: an
// *unknownOutcome naming ids if an earlier call of it lost its reply (it
// may have run), else err itself (nothing ran).
func chunkFailure(what string, ids []brand.ID, lost bool, err error) error {
	if lost {
		return &unknownOutcome{ids: ids, cause: err}
	}
	return fmt.Errorf("%s script: %w", what, err)
}

// mint fills ids with new ids above floor, increasing.
func (c *Client) mint(ids []brand.ID, floor brand.ID) error {
	for i := range ids {
		var err error
		if i == 0 {
			ids[i], err = c.minter.MintAbove(floor)
		} else {
			ids[i], err = c.minter.Mint()
		}
		if err != nil {
			return fmt.Errorf("mint: %w", err)
		}
	}
	return nil
}

// appendArgs builds scriptAppend's ARGV.
func appendArgs(retry bool, ids []brand.ID, recs [][]Field) []string {
	n := 2
	for _, r := range recs {
		n += 2 + 2*len(r)
	}
	args := make([]string, 0, n)
	if retry {
		args = append(args, "1")
	} else {
		args = append(args, "0")
	}
	args = append(args, strconv.Itoa(len(recs)))
	for i, r := range recs {
		args = append(args, ids[i].RedisID(), strconv.Itoa(len(r)))
		for _, f := range r {
			args = append(args, f.Name, f.Value)
		}
	}
	return args
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Page is one XRANGE (or XREVRANGE) round trip of a Cursor: the records it
// returned, in the order read, and the entries that are not records.
type Page struct {
	Records []Record      // the page's records, in read order
	Foreign []*EntryError // the page's entries that are not records
}

// Cursor reads an inclusive range of a stream page by page, forward or in
// reverse. Each Next is one round trip; records appended meanwhile inside
// the range are seen if the cursor has not passed them.
type Cursor struct {
	c          *Client
	key        string
	start, end string
	reverse    bool
	done       bool
}

// NewCursor returns a cursor over the records of stream s of queue q with
// ids in [from, to] (xid.Min and xid.Max: that end open).
func (c *Client) NewCursor(ref names.StreamRef, from, to xid.ID, reverse bool) (*Cursor, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	return &Cursor{c: c, key: StreamKey(ref), start: startBound(from), end: endBound(to), reverse: reverse, done: to.Less(from)}, nil
}

// Done reports whether the cursor has read its whole range.
func (cur *Cursor) Done() bool { return cur.done }

// Next reads at most count entries (count ≤ 0: Options.PageSize).
func (cur *Cursor) Next(ctx context.Context, count int) (Page, error) {
	entries, err := cur.fetch(ctx, count)
	if err != nil {
		return Page{}, err
	}
	var p Page
	for _, e := range entries {
		rec, err := decodeEntry(cur.key, e.xid, e.kv)
		if err != nil {
			var ee *EntryError
			errors.As(err, &ee)
			p.Foreign = append(p.Foreign, ee)
			continue
		}
		p.Records = append(p.Records, rec)
	}
	return p, nil
}

func (cur *Cursor) fetch(ctx context.Context, count int) ([]rawEntry, error) {
	if cur.done {
		return nil, nil
	}
	if count <= 0 {
		count = cur.c.opts.PageSize
	}
	rdb := cur.c.rdb
	var cmd rueidis.Completed
	if cur.reverse {
		cmd = rdb.B().Xrevrange().Key(cur.key).End(cur.end).Start(cur.start).Count(int64(count)).Build()
	} else {
		cmd = rdb.B().Xrange().Key(cur.key).Start(cur.start).End(cur.end).Count(int64(count)).Build()
	}
	msgs, err := rdb.Do(ctx, cmd).ToArray()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cur.key, cur.c.typeError(ctx, err, cur.key))
	}
	entries, err := rawEntries(msgs)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cur.key, err)
	}
	if len(entries) < count {
		cur.done = true
	} else if last := "(" + entries[len(entries)-1].xid; cur.reverse {
		cur.end = last
	} else {
		cur.start = last
	}
	return entries, nil
}

// Read returns the records of stream s of queue q with ids in [from, to],
// at most count of them (count ≤ 0: all), oldest first or, with reverse,
// newest first. It reads in pages of Options.PageSize. Every entry Redis
// stores is a record (any id, any bytes); a reply that is not an entry
// yields an *EntryError (wrapping ErrForeignEntry) in its place, and the
// iteration goes on if the loop does. A failed read yields its error and
// ends the iteration.
func (c *Client) Read(ctx context.Context, ref names.StreamRef, from, to xid.ID, count int, reverse bool) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		cur, err := c.NewCursor(ref, from, to, reverse)
		if err != nil {
			yield(Record{}, err)
			return
		}
		n := 0
		for !cur.done && (count <= 0 || n < count) {
			size := c.opts.PageSize
			if count > 0 {
				size = min(size, count-n)
			}
			entries, err := cur.fetch(ctx, size)
			if err != nil {
				yield(Record{}, err)
				return
			}
			for _, e := range entries {
				n++
				if !yield(decodeEntry(cur.key, e.xid, e.kv)) {
					return
				}
			}
		}
	}
}

// StreamInfo describes a stream. Ids are given raw (as Redis has them) and
// as branded ids (brandedFloor: the largest branded id at or below).
type StreamInfo struct {
	Exists       bool     // false: no such key (every other field is zero)
	Length       int64    // number of entries
	FirstXID     string   // the oldest entry ("" if empty)
	LastXID      string   // the newest entry ("" if empty)
	TopXID       string   // last-generated-id: appends must be above it
	MaxDeleted   string   // max-deleted-entry-id (moved by XDEL, not by trims)
	EntriesAdded int64    // entries ever added
	Groups       int64    // consumer groups
	First        brand.ID // FirstXID as a branded id
	Last         brand.ID // LastXID as a branded id
	Top          brand.ID // TopXID as a branded id
}

// Info returns what XINFO STREAM says of stream s of queue q. A missing
// stream has Exists false and zero values.
func (c *Client) Info(ctx context.Context, ref names.StreamRef) (StreamInfo, error) {
	if err := checkRef(ref); err != nil {
		return StreamInfo{}, err
	}
	return c.info(ctx, StreamKey(ref))
}

func (c *Client) info(ctx context.Context, key string) (StreamInfo, error) {
	m, err := c.rdb.Do(ctx, c.rdb.B().XinfoStream().Key(key).Build()).AsMap()
	if err != nil {
		if isServerError(err) && !rueidis.IsRedisNil(err) {
			if n, e2 := c.rdb.Do(ctx, c.rdb.B().Exists().Key(key).Build()).AsInt64(); e2 == nil && n == 0 {
				return StreamInfo{}, nil
			}
		}
		return StreamInfo{}, fmt.Errorf("XINFO STREAM %s: %w", key, c.typeError(ctx, err, key))
	}
	var in StreamInfo
	in.Exists = true
	intOf := func(name string) int64 {
		v, ok := m[name]
		if !ok {
			return 0
		}
		n, _ := v.AsInt64()
		return n
	}
	strOf := func(name string) string {
		v, ok := m[name]
		if !ok {
			return ""
		}
		s, _ := v.ToString()
		return s
	}
	entryID := func(name string) string {
		v, ok := m[name]
		if !ok || v.IsNil() {
			return ""
		}
		e, err := rawEntryOf(&v)
		if err != nil {
			return ""
		}
		return e.xid
	}
	in.Length = intOf("length")
	in.EntriesAdded = intOf("entries-added")
	in.Groups = intOf("groups")
	in.TopXID = strOf("last-generated-id")
	in.MaxDeleted = strOf("max-deleted-entry-id")
	in.FirstXID = entryID("first-entry")
	in.LastXID = entryID("last-entry")
	for _, p := range []struct {
		xid string
		id  *brand.ID
	}{{in.FirstXID, &in.First}, {in.LastXID, &in.Last}, {in.TopXID, &in.Top}} {
		if p.xid == "" {
			continue
		}
		if *p.id, err = brandedFloor(p.xid); err != nil {
			return in, fmt.Errorf("XINFO STREAM %s: %w", key, err)
		}
	}
	return in, nil
}

// Top returns the stream's last generated id as a branded id (0 for a
// missing or fresh stream): every append lands above it.
func (c *Client) Top(ctx context.Context, ref names.StreamRef) (brand.ID, error) {
	in, err := c.Info(ctx, ref)
	return in.Top, err
}

// Len returns the number of entries of stream s of queue q.
func (c *Client) Len(ctx context.Context, ref names.StreamRef) (int64, error) {
	if err := checkRef(ref); err != nil {
		return 0, err
	}
	n, err := c.rdb.Do(ctx, c.rdb.B().Xlen().Key(StreamKey(ref)).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("XLEN %s: %w", StreamKey(ref), c.typeError(ctx, err, StreamKey(ref)))
	}
	return n, nil
}

// SetID raises the last id of stream s of queue q to id (XSETID), never
// lowers it, and creates the stream empty with that last id if it is
// missing. It returns the last id after the call (Redis's, any id). The archive calls it after
// each fold so that no append can land at or below its watermark, even
// after Redis lost data (invariant 2).
func (c *Client) SetID(ctx context.Context, ref names.StreamRef, id xid.ID) (xid.ID, error) {
	if err := checkRef(ref); err != nil {
		return xid.ID{}, err
	}
	key := StreamKey(ref)
	reply, err := c.lua.setID.Exec(ctx, c.rdb, []string{key}, []string{id.String()}).AsStrSlice()
	if err != nil {
		return xid.ID{}, fmt.Errorf("set last id of %s to %s: %w", key, id, c.typeError(ctx, err, key))
	}
	if len(reply) != 2 {
		return xid.ID{}, fmt.Errorf("set last id of %s: unexpected reply %q", key, reply)
	}
	top, err := xid.Parse(reply[1])
	if err != nil {
		return xid.ID{}, fmt.Errorf("set last id of %s: %w", key, err)
	}
	return top, nil
}

// TrimResult says what a trim did.
type TrimResult struct {
	// MinXID is the id the stream was trimmed to (entries below it went):
	// the one asked for, or lower when a consumer group held it back.
	MinXID string
	// Trimmed is the number of entries removed.
	Trimmed int64
	// CappedBy names the consumer group that held the trim back, "" if none.
	CappedBy string
}

// TrimMinID removes the entries of stream s of queue q below minID
// (XTRIM MINID, exact), but never one that a consumer group of the stream
// has pending or not yet delivered, and never on an archived stream: that
// fails with ErrArchived and trims nothing (only the archive driver, which
// folds first, trims those). minID 0-0 trims nothing. The check and the trim
// are one script (scriptTrim), so a registration cannot slip between them.
func (c *Client) TrimMinID(ctx context.Context, ref names.StreamRef, minID xid.ID) (TrimResult, error) {
	if err := checkRef(ref); err != nil {
		return TrimResult{}, err
	}
	if minID.IsZero() {
		return TrimResult{MinXID: "0-0"}, nil
	}
	return c.trim(ctx, ref, minID.String())
}

func (c *Client) trim(ctx context.Context, ref names.StreamRef, minXID string) (TrimResult, error) {
	set, member := ArchivedRegistry(ref)
	keys := []string{StreamKey(ref), set}
	reply, err := c.lua.trim.Exec(ctx, c.rdb, keys, []string{member, minXID}).AsStrSlice()
	if err != nil {
		return TrimResult{}, fmt.Errorf("trim %s to %s: %w", where(ref), minXID, c.typeError(ctx, err, keys...))
	}
	switch {
	case len(reply) == 1 && reply[0] == "ARCHIVED":
		return TrimResult{}, fmt.Errorf("trim %s: %w", where(ref), ErrArchived)
	case len(reply) == 4 && reply[0] == "OK":
		n, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return TrimResult{}, fmt.Errorf("trim %s: bad count %q", where(ref), reply[1])
		}
		return TrimResult{MinXID: reply[2], Trimmed: n, CappedBy: reply[3]}, nil
	}
	return TrimResult{}, fmt.Errorf("trim %s: unexpected reply %q", where(ref), reply)
}
