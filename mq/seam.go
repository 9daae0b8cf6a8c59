package mq

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/echostore/echostore/brand"
)

// Seam is where a stream's archive ends and its live tail begins: the
// watermark W (the highest archived id) and the volume LSN that made W
// durable.
type Seam struct {
	W   brand.ID // the watermark: the highest archived id
	LSN uint64   // the archive volume's LSN that made W durable
}

// PutArchived writes the seam cache of stream s of queue q, the hash
// emq:{q}:stream:s:archived with fields w (W as EVT_…), xid (W's Redis id)
// and lsn (decimal), and registers s in emq:{q}:archived, in one atomic
// step. Any Redis client can read the hash to learn where the live tail
// begins; it is a cache: the truth stays in the archive volume, and the
// archive overwrites the cache after each fold.
func (c *Client) PutArchived(ctx context.Context, q, s string, seam Seam) error {
	if err := checkQS(q, s); err != nil {
		return err
	}
	keys := []string{SeamKey(q, s), ArchivedSetKey(q)}
	args := []string{s, brand.EVT.Format(seam.W), seam.W.RedisID(), strconv.FormatUint(seam.LSN, 10)}
	if err := c.lua.seam.Exec(ctx, c.rdb, keys, args).Error(); err != nil {
		return fmt.Errorf("write seam cache of %s: %w", where(q, s), err)
	}
	return nil
}

// GetArchived reads the seam cache of stream s of queue q. ok is false when
// there is none. Fields that do not form a seam (w not an EVT id, xid not
// w's Redis id, lsn not a number) fail with ErrBadSeam.
func (c *Client) GetArchived(ctx context.Context, q, s string) (seam Seam, ok bool, err error) {
	if err := checkQS(q, s); err != nil {
		return Seam{}, false, err
	}
	key := SeamKey(q, s)
	m, err := c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		return Seam{}, false, fmt.Errorf("read seam cache %s: %w", key, err)
	}
	if len(m) == 0 {
		return Seam{}, false, nil
	}
	return parseSeam(key, m)
}

func parseSeam(key string, m map[string]string) (Seam, bool, error) {
	w, err := brand.EVT.Parse(m["w"])
	if err != nil {
		return Seam{}, false, fmt.Errorf("seam cache %s: w: %w: %w", key, ErrBadSeam, err)
	}
	if m["xid"] != w.RedisID() {
		return Seam{}, false, fmt.Errorf("seam cache %s: xid %q is not the Redis id of w %s (%s): %w",
			key, clip(m["xid"]), m["w"], w.RedisID(), ErrBadSeam)
	}
	lsn, err := strconv.ParseUint(m["lsn"], 10, 64)
	if err != nil {
		return Seam{}, false, fmt.Errorf("seam cache %s: lsn %q: %w", key, clip(m["lsn"]), ErrBadSeam)
	}
	return Seam{W: w, LSN: lsn}, true, nil
}

// RegisterArchived adds stream s to the archived streams of queue q. From
// then on TrimMinID and the Retention driver refuse to trim it.
func (c *Client) RegisterArchived(ctx context.Context, q, s string) error {
	if err := checkQS(q, s); err != nil {
		return err
	}
	if err := c.rdb.Do(ctx, c.rdb.B().Sadd().Key(ArchivedSetKey(q)).Member(s).Build()).Error(); err != nil {
		return fmt.Errorf("register %s as archived: %w", where(q, s), err)
	}
	return nil
}

// IsArchived reports whether stream s is registered as archived in queue q.
func (c *Client) IsArchived(ctx context.Context, q, s string) (bool, error) {
	if err := checkQS(q, s); err != nil {
		return false, err
	}
	ok, err := c.rdb.Do(ctx, c.rdb.B().Sismember().Key(ArchivedSetKey(q)).Member(s).Build()).AsBool()
	if err != nil {
		return false, fmt.Errorf("is %s archived: %w", where(q, s), err)
	}
	return ok, nil
}

// scriptSeamDrop deletes the seam hash if its w is still ARGV[1], so that a
// cache another node raised meanwhile is kept. Replies 1 if it deleted.
const scriptSeamDrop = "#!lua\n" + `
if redis.call('HGET', KEYS[1], 'w') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`

// DropArchived deletes the seam cache of stream s of queue q if its W is
// still w (the stream stays registered as archived). It is for an archive
// volume that a confirmed reset emptied: a cache naming folds that no
// longer exist anywhere would make every read and cycle refuse the volume
// as behind it. It reports whether it deleted the cache.
func (c *Client) DropArchived(ctx context.Context, q, s string, w brand.ID) (bool, error) {
	if err := checkQS(q, s); err != nil {
		return false, err
	}
	// Built per call: a confirmed reset is rare, and the client's script
	// set stays the hot paths'.
	n, err := rueidis.NewLuaScript(scriptSeamDrop).Exec(ctx, c.rdb, []string{SeamKey(q, s)}, []string{brand.EVT.Format(w)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("drop seam cache of %s: %w", where(q, s), err)
	}
	return n == 1, nil
}
