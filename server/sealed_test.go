package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/names"
)

// keyFile writes a fresh key as 64 hex digits (openssl rand -hex 32) to a
// file of mode 0600 and returns its path.
func keyFile(t *testing.T) string {
	t.Helper()
	raw := make([]byte, sealed.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "remote.key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// zstdFrames returns the decompressed bytes of every zstd frame that
// starts anywhere in b (what a reader of a plaintext segment would see).
func zstdFrames(t *testing.T, b []byte) []byte {
	t.Helper()
	var out []byte
	magic := []byte{0x28, 0xB5, 0x2F, 0xFD}
	for i := 0; ; i++ {
		j := bytes.Index(b[i:], magic)
		if j < 0 {
			return out
		}
		i += j
		d, err := zstd.NewReader(bytes.NewReader(b[i:]), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(16<<20))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(d) // whatever decodes before an error
		d.Close()
		out = append(out, got...)
	}
}

// sealedRun is a server's run of TestRemoteEncryptedAtRest: its queue,
// the bucket, the distinctive bytes it wrote.
type sealedRun struct {
	e                        *env
	cfg                      Config
	q, bucket, mark          string
	fieldMarks, payloadMarks []string
}

const sealedRecords, sealedKeep, sealedJobs = 300, 20, 25

// fillRemote starts a server with remote_key_file kf ("": none) on a
// bucket of its own, appends records with distinctive field values, cycles
// them into the archive (trim after remote: the cycle pushes) and enqueues
// sync jobs with distinctive payloads.
func fillRemote(t *testing.T, m interface {
	CreateBucket(ctx context.Context, name string) error
	URL(bucket string) string
}, kf string) *sealedRun {
	t.Helper()
	r := &sealedRun{q: queueName(t), bucket: fmt.Sprintf("sealed-%d-%08x", os.Getpid(), crc32.ChecksumIEEE([]byte(t.Name())))}
	if err := m.CreateBucket(t.Context(), r.bucket); err != nil {
		t.Fatal(err)
	}
	r.cfg = Config{Data: t.TempDir(), Remote: m.URL(r.bucket), RemoteKeyFile: kf, Defaults: StreamConfig{TrimAfter: "remote"}}
	r.e = start(t, r.cfg)
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	r.mark = hex.EncodeToString(tag)
	var in strings.Builder
	for i := range sealedRecords {
		fm := fmt.Sprintf("FIELDVALUE-%s-%04d", r.mark, i)
		r.fieldMarks = append(r.fieldMarks, fm)
		fmt.Fprintf(&in, `{"fields":{"n":"%d","secret":"%s","body":"plaintext body of record %d, %s"}}`+"\n", i, fm, i, strings.Repeat("x", 200))
	}
	r.e.must("POST", "/v1/streams/"+r.q+"/events", in.String())
	var cyc struct{ Folded int64 }
	if err := json.Unmarshal(r.e.must("POST", "/v1/streams/"+r.q+"/events/cycle?keep="+fmt.Sprint(sealedKeep), ""), &cyc); err != nil {
		t.Fatal(err)
	}
	if cyc.Folded != sealedRecords-sealedKeep {
		t.Fatalf("cycle folded %d, want %d", cyc.Folded, sealedRecords-sealedKeep)
	}
	for i := range sealedJobs {
		pm := fmt.Sprintf("PAYLOADVALUE-%s-%04d", r.mark, i)
		r.payloadMarks = append(r.payloadMarks, pm)
		r.e.must("POST", "/v1/queues/"+r.q+"/jobs?mode=sync", fmt.Sprintf(`{"payload":{"note":"%s","i":%d}}`, pm, i))
	}
	return r
}

// readAll checks that e's merge-read of the run's stream holds every record.
func (r *sealedRun) readAll(t *testing.T, e *env) {
	t.Helper()
	got := string(e.must("GET", "/v1/streams/"+r.q+"/events", ""))
	if n := strings.Count(got, "\n"); n != sealedRecords {
		t.Fatalf("merge-read: %d records, want %d", n, sealedRecords)
	}
	for _, fm := range r.fieldMarks {
		if !strings.Contains(got, fm) {
			t.Fatalf("merge-read lacks %s", fm)
		}
	}
}

// clearBytes returns what a reader without a key sees of an object: its
// bytes and those of every zstd frame found in it.
func clearBytes(t *testing.T, b []byte) []byte { return append(bytes.Clone(b), zstdFrames(t, b)...) }

// TestRemoteGrepControl is the control of TestRemoteEncryptedAtRest's
// grep: without a key, the same run leaves every archived record's field
// value and every payload findable by that grep.
func TestRemoteGrepControl(t *testing.T) {
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	r := fillRemote(t, m, "")
	if err := r.e.stop(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	raw, err := remote.Open(ctx, m.URL(r.bucket), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	objs, err := raw.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, o := range objs {
		b, err := raw.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, clearBytes(t, b)...)
	}
	for _, mk := range slices.Concat(r.fieldMarks[:sealedRecords-sealedKeep], r.payloadMarks) {
		if !bytes.Contains(all, []byte(mk)) {
			t.Fatalf("without a key, %s is not found in the bucket's %d objects: the grep would prove nothing", mk, len(objs))
		}
	}
}

// TestRemoteEncryptedAtRest: a server with remote_key_file on a real
// MinIO appends records with distinctive field values, cycles them into
// the archive (trim after remote: the cycle pushes), enqueues sync jobs
// with distinctive payloads; then every object of the bucket, listed and
// read directly, raw and through every zstd frame found in it, holds none
// of those bytes, and every object is an envelope of the key's id. Opened
// with the key, the same objects hold every archived record and every
// payload; the server reads everything back, before and after a restart;
// without the key, or with another, the remote log is a typed error.
func TestRemoteEncryptedAtRest(t *testing.T) {
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	kf := keyFile(t)
	r := fillRemote(t, m, kf)
	q, bucket, mark, cfg, fieldMarks, payloadMarks, e := r.q, r.bucket, r.mark, r.cfg, r.fieldMarks, r.payloadMarks, r.e
	const records, keep, jobs = sealedRecords, sealedKeep, sealedJobs
	readAll := func(e *env) { t.Helper(); r.readAll(t, e) }
	readAll(e)
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	raw, err := remote.Open(ctx, m.URL(bucket), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	objs, err := raw.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := sealed.LoadKeyring(kf, sealed.Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opened := sealed.New(raw, ring)
	var inClear bytes.Buffer // what the key opens, decoded
	var segments, commits int
	for _, o := range objs {
		b, err := raw.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:4]) != remote.SealedMagic || !bytes.Equal(b[8:16], idOf(ring.WriteID())) {
			t.Fatalf("object %s (%d bytes) is not an envelope of key %s: %q", o.Key, len(b), ring.WriteID(), b[:min(16, len(b))])
		}
		seen := clearBytes(t, b)
		for _, mk := range append(append([]string{mark}, fieldMarks...), payloadMarks...) {
			if bytes.Contains(seen, []byte(mk)) {
				t.Fatalf("object %s holds %q in the clear", o.Key, mk)
			}
		}
		for _, plain := range []string{"plaintext body", `"secret"`, `"payload"`, `"note"`, strings.Repeat("x", 32)} {
			if bytes.Contains(seen, []byte(plain)) {
				t.Fatalf("object %s holds %q in the clear", o.Key, plain)
			}
		}
		p, err := opened.Get(ctx, o.Key)
		if err != nil {
			t.Fatalf("object %s with the key: %v", o.Key, err)
		}
		inClear.Write(p)
		if _, pages, err := remote.DecodeSegment(p); err == nil {
			segments++
			for _, pg := range pages {
				inClear.Write(pg.Data)
			}
		}
		if c, err := remote.DecodeCommit(p); err == nil {
			commits++
			for _, pg := range c.Inline {
				inClear.Write(pg.Data)
			}
		}
	}
	if commits == 0 {
		t.Fatalf("the bucket's %d objects hold no commit", len(objs))
	}
	for i, fm := range fieldMarks[:records-keep] {
		if !bytes.Contains(inClear.Bytes(), []byte(fm)) {
			t.Fatalf("archived record %d (%s) is in no object, even with the key", i, fm)
		}
	}
	for _, pm := range payloadMarks {
		if !bytes.Contains(inClear.Bytes(), []byte(pm)) {
			t.Fatalf("sync job payload %s is in no object, even with the key", pm)
		}
	}
	t.Logf("%d objects (%d commits, %d segments): none holds a field or payload in the clear; opened, they hold all %d archived records and %d payloads",
		len(objs), commits, segments, records-keep, jobs)

	// Without the key the log says it is encrypted; with another key, that
	// it is sealed with a key the keyring lacks.
	vol := volName("archive." + q + ".events")
	if _, err := mustLog(t, raw, vol).Read(ctx, 1); !errors.Is(err, remote.ErrSealed) {
		t.Fatalf("the archive's log without the key: %v, want remote.ErrSealed", err)
	}
	other, err := sealed.LoadKeyring(keyFile(t), sealed.Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustLog(t, sealed.New(raw, other), vol).Read(ctx, 1); !errors.Is(err, sealed.ErrUnknownKey) {
		t.Fatalf("the archive's log with another key: %v, want sealed.ErrUnknownKey", err)
	}
	// With the key, the archive's remote state and every page read back.
	l := mustLog(t, opened, vol)
	st, err := l.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Pages {
		if _, err := l.FetchPage(ctx, r); err != nil {
			t.Fatalf("page %d: %v", r.Index, err)
		}
	}
	// The same node, restarted with its key, reads everything back.
	readAll(start(t, cfg))
}

func idOf(id sealed.KeyID) []byte { return id[:] }

func mustLog(t *testing.T, s remote.Store, v names.Volume) *remote.Log {
	t.Helper()
	l, err := remote.NewLog(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRemoteKeyRotation: a server writes with key A (records cycled into
// the archive, sync jobs); restarted with key B and A kept for reading, it
// reads everything and writes more (sealed with B); Survey counts objects
// of both keys; Reseal moves A's to B; then A leaves the keyring, and a
// server on a fresh data dir with B alone reads the whole stream, pulling
// the archive from the remote, while one with A alone cannot.
func TestRemoteKeyRotation(t *testing.T) {
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	kA, kB := keyFile(t), keyFile(t)
	r := fillRemote(t, m, kA)
	ctx := t.Context()
	if err := r.e.stop(); err != nil {
		t.Fatal(err)
	}
	ringOf := func(write string, old ...string) *sealed.Keyring {
		ring, err := sealed.LoadKeyring(write, sealed.Key{}, old)
		if err != nil {
			t.Fatal(err)
		}
		return ring
	}
	a, b := ringOf(kA).WriteID(), ringOf(kB).WriteID()

	rotated := r.cfg
	rotated.RemoteKeyFile, rotated.RemoteOldKeyFiles = kB, []string{kA}
	e := start(t, rotated)
	r.readAll(t, e)
	more := appendN(e, r.q, "events", sealedRecords, 100)
	e.must("POST", "/v1/streams/"+r.q+"/events/cycle?keep=10", "")
	e.must("POST", "/v1/queues/"+r.q+"/jobs?mode=sync", `{"payload":{"after":"rotation"}}`)
	want := e.must("GET", "/v1/streams/"+r.q+"/events", "")
	if n := strings.Count(string(want), "\n"); n != sealedRecords+len(more) {
		t.Fatalf("after the rotation: %d records, want %d", n, sealedRecords+len(more))
	}
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	raw, err := remote.Open(ctx, m.URL(r.bucket), drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c, err := sealed.Survey(ctx, raw, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.ByKey[a] == 0 || c.ByKey[b] == 0 || c.ByKey[a]+c.ByKey[b] != c.Objects || c.NotSealed != 0 {
		t.Fatalf("survey after the rotation: %+v", c)
	}
	res, err := sealed.Reseal(ctx, sealed.New(raw, ringOf(kB, kA)), "")
	if err != nil || res.Resealed != c.ByKey[a] {
		t.Fatalf("reseal: %+v, %v; survey said %+v", res, err, c)
	}
	if c, err = sealed.Survey(ctx, raw, ""); err != nil || c.ByKey[a] != 0 || c.ByKey[b] != c.Objects {
		t.Fatalf("survey after reseal: %+v, %v", c, err)
	}

	// B alone, on a data dir of its own: the merge-read pulls the archive
	// from the remote and returns every record.
	fresh := r.cfg
	fresh.Data, fresh.RemoteKeyFile, fresh.RemoteOldKeyFiles = t.TempDir(), kB, nil
	got := start(t, fresh).must("GET", "/v1/streams/"+r.q+"/events", "")
	if !bytes.Equal(got, want) {
		t.Fatalf("B alone on a fresh data dir: %d records, want the %d read before", strings.Count(string(got), "\n"), strings.Count(string(want), "\n"))
	}
	// A alone cannot read what is now sealed with B: a typed error, no data.
	old := r.cfg
	old.Data = t.TempDir()
	ea := start(t, old)
	code, body := ea.do("GET", "/v1/streams/"+r.q+"/events", "", nil)
	ea.wantError(code, body, 500, CodeRemoteKey)
	if bytes.Contains(body, []byte(r.fieldMarks[0])) || !bytes.Contains(body, []byte(b.String())) {
		t.Fatalf("A alone: %d %s", code, body)
	}
}
