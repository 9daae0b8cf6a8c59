package mq

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// awkwardKeys are stream keys whose slot tag is not simply "{K}": own
// hashtags, braces without a tag, empty tags, a '}' before the '{', binary.
var awkwardKeys = []string{
	"orders", "{app}:orders", "x{app}y", "a}b", "}", "{", "{}", "{}x", "x{}", "{}{a}", "}{a}", "{a}}",
	"a{b", "{{a}}", "a{b}c{d}", "a}{", "{}}", "}{}", "emq", "\x00", "\xff}\x00", "a b}\n", strings.Repeat("}", 300),
	"{" + strings.Repeat("x", 1000), "é}",
}

func mustKey(t testing.TB, s string) names.Key {
	t.Helper()
	k, err := names.ParseKey(s)
	if err != nil {
		t.Fatalf("ParseKey(%q): %v", s, err)
	}
	return k
}

// TestCRC16: the CRC of Redis Cluster (CRC-16/XMODEM) on its check value
// and on slots Redis documents.
func TestCRC16(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, slot := range map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061} {
		if got := Slot(key); got != slot {
			t.Errorf("Slot(%q) = %d, want %d", key, got, slot)
		}
	}
}

// TestKeyMetaSameSlot: every metadata key of a key stream, and its
// registry, hash to the key's own slot; the tag holds no '}'.
func TestKeyMetaSameSlot(t *testing.T) {
	for _, s := range awkwardKeys {
		k := mustKey(t, s)
		tag := KeyTag(k)
		if tag == "" || strings.Contains(tag, "}") {
			t.Fatalf("KeyTag(%q) = %q", s, tag)
		}
		want := Slot(s)
		ref := names.KeyRef(k)
		set, member := ArchivedRegistry(ref)
		if member != s || StreamKey(ref) != s {
			t.Fatalf("registry member %q, stream key %q of %q", member, StreamKey(ref), s)
		}
		for _, mk := range []string{set, KeyMetaKey(k, "key-archived"), KeyMetaKey(k, "key-lease"), KeyMetaKey(k, "key-lease-seq")} {
			if got := Slot(mk); got != want {
				t.Errorf("key %q: %q is in slot %d, the key in %d", s, mk, got, want)
			}
		}
	}
}

// TestKeyTagEverySlot: SlotTag finds a tag for each of the 16384 slots
// within its bound, so KeyTag always has one.
func TestKeyTagEverySlot(t *testing.T) {
	found := make([]bool, 16384)
	left := len(found)
	for n := 0; n < MaxSlotTagSearch && left > 0; n++ {
		s := crc16("slot-"+itoa(n)) & 16383
		if !found[s] {
			found[s] = true
			left--
		}
	}
	if left != 0 {
		t.Fatalf("%d slots not reached below %d", left, MaxSlotTagSearch)
	}
	for _, slot := range []uint16{0, 1, 8000, 16383} {
		if got := crc16(SlotTag(slot)) & 16383; got != slot {
			t.Fatalf("SlotTag(%d) hashes to %d", slot, got)
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestKeySlotsOnCluster: Redis Cluster's own CLUSTER KEYSLOT agrees with
// Slot on every awkward key and its metadata keys.
func TestKeySlotsOnCluster(t *testing.T) {
	c := cluster(t, Options{})
	ctx := testCtx(t)
	for _, s := range awkwardKeys {
		k := mustKey(t, s)
		set, _ := ArchivedRegistry(names.KeyRef(k))
		for _, key := range []string{s, set, KeyMetaKey(k, "key-archived")} {
			got, err := c.rdb.Do(ctx, c.rdb.B().ClusterKeyslot().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if uint16(got) != Slot(key) {
				t.Errorf("CLUSTER KEYSLOT %q = %d, Slot = %d", key, got, Slot(key))
			}
		}
	}
}

// TestKeyStreamTrimRefusedWhenArchived: mq's trim refuses a key stream
// registered in its key registry, as it refuses an archived queue stream.
func TestKeyStreamTrimRefusedWhenArchived(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		k := mustKey(t, "{"+queueName(t)+"}}orders")
		ref := names.KeyRef(k)
		if err := c.rdb.Do(ctx, c.rdb.B().Xadd().Key(k.String()).Id("*").FieldValue().FieldValue("a", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TrimMinID(ctx, ref, xid.ID{Seq: 1}); err != nil {
			t.Fatalf("trim of an unarchived key stream: %v", err)
		}
		set, member := ArchivedRegistry(ref)
		if err := c.SAdd(ctx, set, member); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TrimMinID(ctx, ref, xid.ID{Seq: 1}); !errors.Is(err, ErrArchived) {
			t.Fatalf("trim of an archived key stream: %v, want ErrArchived", err)
		}
	})
}

// TestKeyStreamRetention: trim-only retention bounds a key stream that is
// not archived, and refuses it once it is registered in its key registry.
func TestKeyStreamRetention(t *testing.T) {
	eachServer(t, Options{}, func(t *testing.T, c *Client) {
		ctx := testCtx(t)
		k := mustKey(t, "a}b."+queueName(t))
		ref := names.KeyRef(k)
		for i := range 5 {
			if err := c.rdb.Do(ctx, c.rdb.B().Xadd().Key(k.String()).Id(fmt.Sprintf("1733052000%03d-0", i)).FieldValue().FieldValue("n", "1").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		r := c.NewRetention(nil)
		if err := r.Declare(ref, Window{Keep: 2}); err != nil {
			t.Fatal(err)
		}
		reps, err := r.Cycle(ctx)
		if err != nil || len(reps) != 1 || reps[0].Result.Trimmed != 3 {
			t.Fatalf("retention of a key stream: %+v %v", reps, err)
		}
		set, member := ArchivedRegistry(ref)
		if err := c.SAdd(ctx, set, member); err != nil {
			t.Fatal(err)
		}
		if reps, err := r.Cycle(ctx); !errors.Is(err, ErrArchived) || len(reps) != 1 {
			t.Fatalf("retention of an archived key stream: %+v %v, want ErrArchived", reps, err)
		}
	})
}
