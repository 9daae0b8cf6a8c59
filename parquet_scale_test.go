package echostore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
)

// TestExportMemoryFlat (ECHOSTORE_EXPORT_SCALE=1): `echostore export`, a
// process of its own, exports a stream of 1M archived records with binary
// values, and of 10M (ECHOSTORE_EXPORT_SCALE_MAX sets the larger count),
// and its peak resident memory (getrusage's maxrss) stays under 150 MB
// for both: an export holds a row group, one file's typing and the small
// block cache of the CLI's open, whatever the history.
func TestExportMemoryFlat(t *testing.T) {
	if os.Getenv("ECHOSTORE_EXPORT_SCALE") != "1" {
		t.Skip("set ECHOSTORE_EXPORT_SCALE=1: it archives 11M records (a few minutes)")
	}
	top := 10_000_000
	if v := os.Getenv("ECHOSTORE_EXPORT_SCALE_MAX"); v != "" {
		var err error
		if top, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 150 << 20
	if _, err := os.Stat(timeBin); err != nil {
		t.Skipf("the peak is measured by GNU time (apt-get install -y time): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "echostore")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/echostore").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/echostore: %v\n%s", err, out)
	}
	for _, n := range []int{1_000_000, top} {
		rss, took := exportScale(t, bin, n)
		t.Logf("export of %d records: peak RSS %.1f MB, %v (%.0f records/s)", n, float64(rss)/(1<<20), took, float64(n)/took.Seconds())
		if rss > limit {
			t.Errorf("export of %d records peaked at %.1f MB resident, over %d MB", n, float64(rss)/(1<<20), limit>>20)
		}
	}
}

// timeBin is GNU time, which measures the export's peak.
const timeBin = "/usr/bin/time"

// exportScale archives n records in a fresh data dir, then exports them
// with the CLI bin and returns its peak RSS in bytes and how long it took.
func exportScale(t *testing.T, bin string, n int) (int64, time.Duration) {
	ctx := t.Context()
	data := t.TempDir()
	node, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: redisURL, Remote: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ref := streamRef(t, fmt.Sprintf("scale%d", n))
	const batch = 10_000
	recs := make([][]echostore.Field, batch)
	for b := 0; b < n/batch; b++ {
		for i := range recs {
			k := b*batch + i
			recs[i] = []echostore.Field{{Name: "n", Value: strconv.Itoa(k)}, {Name: "kind", Value: []string{"order", "refund"}[k%2]},
				{Name: "blob", Value: string([]byte{0, 0xff, byte(k), byte(k >> 8)})}}
		}
		if _, err := node.Append(ctx, ref, recs); err != nil {
			t.Fatal(err)
		}
		if b%10 == 9 {
			if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 100}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The peak is GNU time's: the getrusage of a child that Go's os/exec
	// started counts the test process's own peak as the child's (it
	// starts children with vfork, sharing the parent's memory until the
	// exec), where time forks its child.
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, timeBin, "-f", "maxrss_kb %M", bin, "--data", data, "--redis", redisURL,
		"export", ref.Queue().String(), ref.Stream().String(), "--dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("echostore export: %v\n%s%s", err, out, stderr.Bytes())
	}
	var res echostore.ExportResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("echostore export printed %q: %v", out, err)
	}
	if res.Rows != int64(n) {
		t.Fatalf("exported %d records of %d", res.Rows, n)
	}
	var kb int64
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if _, err := fmt.Sscanf(lines[len(lines)-1], "maxrss_kb %d", &kb); err != nil {
		t.Fatalf("time printed %q: %v", stderr.Bytes(), err)
	}
	return kb << 10, took
}
