package echostore_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// exportChildEnv names, in a child of the test binary, the data dir whose
// stream the child exports (TestExportMemoryFlat): "DATA QUEUE STREAM DIR
// REDIS".
const exportChildEnv = "ECHOSTORE_EXPORT_CHILD"

// TestExportMemoryFlat (ECHOSTORE_EXPORT_SCALE=1): a child process exports
// a stream of 1M archived records with binary values, and of 10M
// (ECHOSTORE_EXPORT_SCALE_MAX sets the larger count), and its peak
// resident memory (getrusage's maxrss) stays under 150 MB for both: an
// export holds a row group and one file's typing, whatever the history.
func TestExportMemoryFlat(t *testing.T) {
	if spec := os.Getenv(exportChildEnv); spec != "" {
		exportChild(t, spec)
		return
	}
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
	for _, n := range []int{1_000_000, top} {
		rss, took := exportScale(t, n)
		t.Logf("export of %d records: peak RSS %.1f MB, %v (%.0f records/s)", n, float64(rss)/(1<<20), took, float64(n)/took.Seconds())
		if rss > limit {
			t.Errorf("export of %d records peaked at %.1f MB resident, over %d MB", n, float64(rss)/(1<<20), limit>>20)
		}
	}
}

// exportScale archives n records in a fresh data dir, then exports them in
// a child process and returns its peak RSS in bytes and how long it took.
func exportScale(t *testing.T, n int) (int64, time.Duration) {
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
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestExportMemoryFlat$", "-test.count=1")
	cmd.Env = append(os.Environ(), exportChildEnv+"="+data+" "+ref.Queue().String()+" "+ref.Stream().String()+" "+t.TempDir()+" "+redisURL)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("export child: %v\n%s", err, out)
	}
	if i := bytes.Index(out, []byte("child: ")); i >= 0 {
		t.Log(string(out[i : i+bytes.IndexByte(out[i:], '\n')]))
	}
	took := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage of the child on this system")
	}
	return ru.Maxrss << 10, took // kilobytes on Linux
}

// exportChild is the child of exportScale: it exports the stream and
// checks the count.
func exportChild(t *testing.T, spec string) {
	var data, q, s, dir, redis string
	if _, err := fmt.Sscan(spec, &data, &q, &s, &dir, &redis); err != nil {
		t.Fatal(err)
	}
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatal(err)
	}
	node, err := echostore.Open(t.Context(), echostore.Config{Data: data, Redis: redis, DeferJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(t.Context())
	res, err := node.Export(t.Context(), ref, echostore.ExportOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows == 0 {
		t.Fatal("nothing exported")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("child: heap sys %d MB, heap in use %d MB, total alloc %d MB\n", ms.HeapSys>>20, ms.HeapInuse>>20, ms.TotalAlloc>>20)
}
