package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/diskguard"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// copyDir copies the tree at src to dst, but for graft's ballast file (the
// store lays its own).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if d.Name() == diskguard.BallastName {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// files lists the regular files under dir (relative paths) whose names
// pass keep.
func files(t *testing.T, dir string, keep func(string) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !keep(d.Name()) {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// damage is one way to damage a file: a flipped bit or a cut.
type damage struct {
	name string
	do   func(b []byte) []byte
}

// damages returns n random damages of a file of size n bytes: bit flips
// anywhere, cuts anywhere, and the file emptied.
func damages(rng *rand.Rand, size, n int) []damage {
	if size == 0 {
		return nil
	}
	out := []damage{{"emptied", func([]byte) []byte { return nil }}}
	for range n {
		pos, bit := rng.IntN(size), rng.IntN(8)
		out = append(out, damage{fmt.Sprintf("bit %d of byte %d flipped", bit, pos), func(b []byte) []byte {
			c := slices.Clone(b)
			c[pos] ^= 1 << bit
			return c
		}})
		cut := rng.IntN(size)
		out = append(out, damage{fmt.Sprintf("cut at %d", cut), func(b []byte) []byte { return b[:cut] }})
	}
	return out
}

func damaged(t *testing.T, path string, d damage) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, d.do(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptOutbox damages each file of an accept outbox (log segments,
// snapshot) in turn, by bit flips and cuts, and reopens it: Open fails with
// a typed error (ErrCorrupt, ErrVersion), or it recovers intents that were
// all recorded, byte for byte, and are a prefix of the recording order (the
// intact prefix kept, nothing after a hole). A flipped bit anywhere loses at
// most K; so does a cut outside the newest log segment. A cut in the newest
// segment is what a torn tail looks like, so what follows it is dropped (the
// figures say how much).
func TestCorruptOutbox(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	const k = 8
	src := filepath.Join(t.TempDir(), "outbox")
	out, err := accept.Open(ctx, src, accept.Options{K: k, CompactMin: 16, CompactRatio: 2, FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var order []accept.Intent
	for i := 1; i <= 150; i++ {
		in := accept.Intent{ID: brand.ID(1000 + i), Queue: mustQueue(t, "q"), Payload: []byte(strconv.Itoa(i))}
		if err := out.Record(ctx, in); err != nil {
			t.Fatal(err)
		}
		order = append(order, in)
		if i == 100 {
			if err := out.Compact(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := out.Close(ctx); err != nil {
		t.Fatal(err)
	}
	names := files(t, src, func(n string) bool { return strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".snap") })
	newest := ""
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > newest {
			newest = n
		}
	}
	if len(names) < 2 || newest == "" {
		t.Fatalf("the outbox has %v: want log segments and a snapshot", names)
	}
	tried, refused, recovered, tailLoss, flipLoss := 0, 0, 0, 0, 0
	for _, name := range names {
		info, err := os.Stat(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range damages(rng, int(info.Size()), 12) {
			dir := filepath.Join(t.TempDir(), "outbox")
			copyDir(t, src, dir)
			damaged(t, filepath.Join(dir, name), d)
			tried++
			o, err := accept.Open(ctx, dir, accept.Options{K: k, FlushInterval: -1})
			if err != nil {
				if !errors.Is(err, accept.ErrCorrupt) && !errors.Is(err, accept.ErrVersion) {
					t.Fatalf("%s, %s: untyped error: %v", name, d.name, err)
				}
				refused++
				continue
			}
			got := map[brand.ID]accept.Intent{}
			for id, in := range o.All() {
				got[id] = in
			}
			o.Close(ctx)
			kept := 0
			for _, w := range order {
				in, ok := got[w.ID]
				if !ok {
					break
				}
				if in.Queue != w.Queue || !bytes.Equal(in.Payload, w.Payload) {
					t.Fatalf("%s, %s: intent %d recovered as %q, recorded as %q", name, d.name, w.ID, in.Payload, w.Payload)
				}
				kept++
			}
			if kept != len(got) {
				t.Fatalf("%s, %s: recovered %d intents, only the first %d of them in order: an intent after a hole", name, d.name, len(got), kept)
			}
			lost := len(order) - kept
			if (name != newest || strings.HasPrefix(d.name, "bit")) && lost > k {
				t.Fatalf("%s, %s: recovery lost %d of %d intents, K = %d", name, d.name, lost, len(order), k)
			}
			if name == newest {
				tailLoss = max(tailLoss, lost)
				if strings.HasPrefix(d.name, "bit") {
					flipLoss = max(flipLoss, lost)
				}
			}
			recovered++
		}
	}
	t.Logf("%d damaged outboxes (%d files): %d refused with a typed error, %d recovered an intact prefix; damage in the newest segment dropped at most %d intents after it (%d after a flipped bit)",
		tried, len(names), refused, recovered, tailLoss, flipLoss)
}

// TestCorruptRemoteObjects damages each object of a remote (commits with
// inline pages and with segments, segments, of an archive volume and an
// accept volume) in turn and reads it back from a fresh data dir: the read
// fails, or returns exactly the records and jobs that were written.
func TestCorruptRemoteObjects(t *testing.T) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	dir := t.TempDir()
	src := filepath.Join(dir, "remote")
	red := servers.Redis(t)
	c := workerConf{nodeConf: nodeConf{Dir: filepath.Join(dir, "node"), Remote: fileURL(src), Redis: red.URL, K: 16, Tier: true, Chunk: 100},
		Queue: queueName(t), Streams: []string{"s"}}
	n, err := openNode(ctx, c.nodeConf)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{600, 20} { // one push with segments, one inline
		if _, err := appendBatch(ctx, n.live, c.Queue, "s", 200, size); err != nil {
			t.Fatal(err)
		}
		if _, err := n.arc.Cycle(ctx, mustRef(t, c.Queue, "s"), archive.Window{Keep: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.tier.Enqueue(ctx, mustQueue(t, c.Queue), 0, []byte(`{"x":1}`), accept.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.close(ctx); err != nil {
		t.Fatal(err)
	}
	vol := "archive." + c.Queue + ".s"
	read := func(remoteDir string) ([]mq.Record, map[brand.ID]uint64, error) {
		rs, err := remote.Open(ctx, fileURL(remoteDir), drivers.All()...)
		if err != nil {
			return nil, nil, err
		}
		defer rs.Close()
		jobs, jerr := accept.RemoteJobs(ctx, rs, volName("accept."+c.Queue+".0"))
		gs, err := graft.Open(ctx, filepath.Join(t.TempDir(), "fresh"), graft.Options{Remote: rs})
		if err != nil {
			return nil, nil, err
		}
		defer gs.Close()
		v, err := gs.CreateVolume(ctx, volName(vol))
		if err != nil {
			return nil, nil, err
		}
		if _, err := v.Pull(ctx, nil); err != nil {
			return nil, jobs, errors.Join(err, jerr)
		}
		var recs []mq.Record
		for r, err := range archive.Read(ctx, v, xid.Min, xid.Max, false) {
			if err != nil {
				return recs, jobs, errors.Join(err, jerr)
			}
			recs = append(recs, r)
		}
		return recs, jobs, jerr
	}
	wantRecs, wantJobs, err := read(src)
	if err != nil || len(wantRecs) == 0 || len(wantJobs) != 2 {
		t.Fatalf("the intact remote: %d records, %d jobs: %v", len(wantRecs), len(wantJobs), err)
	}
	objects := files(t, src, func(n string) bool { return !strings.HasPrefix(n, ".") })
	tried, refused, same := 0, 0, 0
	kinds := map[string]int{}
	for _, name := range objects {
		info, err := os.Stat(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range damages(rng, int(info.Size()), 4) {
			rd := filepath.Join(t.TempDir(), "remote")
			copyDir(t, src, rd)
			damaged(t, filepath.Join(rd, name), d)
			tried++
			recs, jobs, err := read(rd)
			if err != nil {
				refused++
				switch {
				case errors.Is(err, remote.ErrCorrupt):
					kinds["remote.ErrCorrupt"]++
				case errors.Is(err, graft.ErrCorrupt):
					kinds["graft.ErrCorrupt"]++
				case errors.Is(err, archive.ErrCorrupt):
					kinds["archive.ErrCorrupt"]++
				case errors.Is(err, accept.ErrCorrupt):
					kinds["accept.ErrCorrupt"]++
				default:
					kinds["other"]++
					t.Logf("%s, %s: %v", name, d.name, err)
				}
			}
			// What was read, even beside an error, is what was written.
			for i, r := range recs {
				if i >= len(wantRecs) || r.ID != wantRecs[i].ID || !slices.Equal(r.Fields, wantRecs[i].Fields) {
					t.Fatalf("%s, %s: record %d read differs from the one written", name, d.name, i)
				}
			}
			for id, lsn := range jobs {
				if wantJobs[id] != lsn {
					t.Fatalf("%s, %s: job %s at LSN %d, written at %d", name, d.name, brand.JOB.Format(id), lsn, wantJobs[id])
				}
			}
			if err == nil {
				if len(recs) != len(wantRecs) || len(jobs) != len(wantJobs) {
					t.Fatalf("%s, %s: no error, but %d of %d records and %d of %d jobs read", name, d.name, len(recs), len(wantRecs), len(jobs), len(wantJobs))
				}
				same++
			}
		}
	}
	if kinds["other"] > 0 {
		t.Fatalf("%d damaged remotes failed with an untyped error", kinds["other"])
	}
	t.Logf("%d damaged remotes (%d objects): %d refused %v, %d read back intact", tried, len(objects), refused, kinds, same)
}

// TestCorruptPebbleChild opens a damaged graft store and reads every
// commit's page: "OK n" if all n were read back as written, "REFUSED …" if
// Open found commits missing below a volume's head (graft's check of what
// Pebble replayed), "ERR …" at the first other error, "WRONG lsn" at a page
// that differs or is not found.
func TestCorruptPebbleChild(t *testing.T) {
	arg, ok := crashtest.Child("TestCorruptPebbleChild")
	if !ok {
		t.Skip("the child of TestCorruptPebble")
	}
	ctx := context.Background()
	dir, count, _ := strings.Cut(arg, "|")
	n, _ := strconv.Atoi(count)
	st, err := graft.Open(ctx, dir, graft.Options{})
	if mc := (*graft.MissingCommitsError)(nil); errors.As(err, &mc) {
		report("REFUSED open: %v", err)
		return
	} else if err != nil {
		report("ERR open: %v", err)
		return
	}
	defer st.Close()
	v, err := st.Volume(ctx, volName("disk"))
	if err != nil {
		report("ERR volume: %v", err)
		return
	}
	for i := 1; i <= n; i++ {
		snap, err := v.SnapshotAt(ctx, uint64(i))
		if err != nil {
			report("ERR snapshot %d: %v", i, err)
			return
		}
		b, err := snap.Get(ctx, uint64(i%64))
		snap.Close()
		if errors.Is(err, graft.ErrNotFound) { // LSN i wrote it: not found is a wrong read too
			report("WRONG %d (not found)", i)
			return
		}
		if err != nil {
			report("ERR page %d: %v", i, err)
			return
		}
		if !bytes.Equal(b, diskPage(i)) {
			report("WRONG %d", i)
			return
		}
	}
	report("OK %d", n)
}

// TestCorruptPebble damages each file of a closed graft store (tables,
// manifest, options, write-ahead log) in turn and reads every commit back
// in a child process: it fails (an error, or the process ends) or reads
// exactly what was written; never different bytes, nor an older version of
// a page (a cut MANIFEST once gave one: docs/RELIABILITY.md).
func TestCorruptPebble(t *testing.T) {
	if _, ok := crashtest.Child("TestCorruptPebbleChild"); ok {
		return
	}
	ctx := t.Context()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	src := filepath.Join(t.TempDir(), "graft")
	st, err := graft.Open(ctx, src, graft.Options{MemTableSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.CreateVolume(ctx, volName("disk"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 1; i <= n; i++ {
		tx := v.Begin()
		if err := tx.Put(uint64(i%64), diskPage(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx, graft.Synced); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	names := files(t, src, func(n string) bool { return n != "LOCK" && n != diskguard.BallastName })
	outcomes := map[string]int{}
	tried := 0
	for _, name := range names {
		info, err := os.Stat(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		per := 2
		if strings.HasSuffix(name, ".sst") {
			per = 3
		}
		for _, d := range damages(rng, int(info.Size()), per) {
			dir := filepath.Join(t.TempDir(), "graft")
			copyDir(t, src, dir)
			damaged(t, filepath.Join(dir, name), d)
			tried++
			p := crashtest.Start(t, "TestCorruptPebbleChild", fmt.Sprintf("%s|%d", dir, n))
			line, err := p.Next()
			switch {
			case err != nil:
				kind := strings.TrimRight(filepath.Ext(name), "0123456789")
				if kind == "" {
					kind, _, _ = strings.Cut(name, "-")
				}
				if outcomes["the process ended ("+kind+")"]++; outcomes["the process ended ("+kind+")"] == 1 {
					if i := strings.Index(err.Error(), "panic: "); i >= 0 {
						t.Logf("%s, %s: %s", name, d.name, strings.SplitN(err.Error()[i:], "\n", 2)[0])
					}
				}
			case strings.HasPrefix(line, "WRONG"):
				t.Fatalf("%s, %s: a read returned other bytes than its LSN wrote: %s (seed %d)", name, d.name, line, seed)
			case strings.HasPrefix(line, "REFUSED"):
				outcomes["REFUSED"]++
				t.Logf("%s, %s: %.300s", name, d.name, line)
			default:
				outcomes[strings.Fields(line)[0]]++
			}
			p.Kill()
		}
	}
	t.Logf("%d damaged stores (%d files): %v", tried, len(names), outcomes)
}
