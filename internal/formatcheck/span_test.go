package formatcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// TestReaderSpanningRecords: reader.py reads records larger than a page
// (version-3 heads and version-4 continuations, docs/FORMAT.md) exactly as
// `echostore stream read --archive-only` prints them, in both directions,
// before and after retention drops a head and part of its continuations.
// The entries are XADDed by redis-cli: random bytes, not UTF-8.
func TestReaderSpanningRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	py := pythonWithZstd(ctx, t)
	cliPath, err := exec.LookPath("redis-cli")
	if err != nil {
		testserver.Unavailable(t, err)
	}
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })
	dir := t.TempDir()
	bin := filepath.Join(dir, "echostore")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/echostore/echostore/cmd/echostore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rdir := filepath.Join(dir, "remote")
	global := []string{"--redis", r.URL, "--data", filepath.Join(dir, "data"), "--remote", "file://" + rdir}
	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{}, global...), args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("echostore %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	rng := rand.New(rand.NewPCG(16, 16))
	xadd := func(value []byte, kv ...string) {
		t.Helper()
		// -x: the value is the last argument, read from stdin as is.
		cmd := exec.CommandContext(ctx, cliPath, append([]string{"-u", r.URL, "-x", "XADD", "big", "*"}, kv...)...)
		cmd.Stdin = bytes.NewReader(value)
		if out, err := cmd.CombinedOutput(); err != nil || bytes.HasPrefix(out, []byte("ERR")) {
			t.Fatalf("redis-cli XADD: %v: %s", err, out)
		}
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	xadd([]byte("small"), "k")
	xadd(random(3<<20), "k", "\xff", "k") // 4 pages, a repeated name
	xadd([]byte("small"), "k")
	xadd(random(2<<20+100), "bin") // 3 pages
	xadd([]byte("tail"), "k")
	cli("archive", "cycle", "--key", "big", "--keep", "1", "--trim-after", "remote")
	compare := func(wantLines int) {
		t.Helper()
		for _, d := range [][]string{nil, {"--reverse"}} {
			want := cli(append([]string{"stream", "read", "--key", "big", "--archive-only"}, d...)...)
			if n := bytes.Count(want, []byte("\n")); n != wantLines {
				t.Fatalf("stream read %v: %d lines, want %d", d, n, wantLines)
			}
			got := runReader(ctx, t, py, append([]string{rdir, "--volume", "archive-key.big"}, d...)...)
			if !bytes.Equal(got, want) {
				t.Fatalf("reader.py %v differs from stream read --archive-only: %s", d, firstDiff(got, want))
			}
		}
	}
	compare(4)
	var st struct{ Archived uint64 }
	if err := json.Unmarshal(cli("archive", "status", "--key", "big"), &st); err != nil || st.Archived != 1+4+1+3 {
		t.Fatalf("archive status: %+v, %v; want 9 pages", st, err)
	}
	// Keep 6 of the 9 pages: the first record, the head of the second and
	// its first continuation are dropped; its other continuations are
	// skipped by both readers.
	cli("archive", "cycle", "--key", "big", "--keep", "1", "--trim-after", "remote", "--retain-count", "6")
	cli("volume", "push", "archive-key.big") // a cycle with nothing to fold does not push its drop
	compare(2)
}
