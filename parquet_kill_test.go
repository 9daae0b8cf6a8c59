package echostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestExportKilled: `echostore export`, a process of its own, is killed
// (SIGKILL) in the middle of an export, after the manifest named a file
// and while the next one was being written; the next export opens the
// data dir the killed one held and completes the folder, whose manifest
// then names files that hold each record of the stream exactly once, in
// id order, and nothing else is left in the folder: no file the manifest
// does not name, no temporary. A kill that lands after the export
// finished is retried once with twice the records, then fails the test:
// it never passes without a kill in the middle.
func TestExportKilled(t *testing.T) {
	begin := time.Now()
	// The CLI builds while the records are appended.
	bin := filepath.Join(t.TempDir(), "echostore")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/echostore")
	var buildOut bytes.Buffer
	build.Stdout, build.Stderr = &buildOut, &buildOut
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	k := killedExport{t: t, bin: bin, data: t.TempDir(), remote: "file://" + t.TempDir(), ref: streamRef(t, "killed")}
	k.grow(300_000)
	t.Logf("appended %d records, half of them archived, in %v", len(k.ids), time.Since(begin).Round(time.Millisecond))
	if err := build.Wait(); err != nil {
		t.Fatalf("go build ./cmd/echostore: %v\n%s", err, buildOut.Bytes())
	}
	t.Logf("built the CLI by %v", time.Since(begin).Round(time.Millisecond))
	var killed echostore.ExportManifestFile
	for attempt := 1; ; attempt++ {
		k.dir = t.TempDir()
		var ok bool
		if killed, ok = k.exportAndKill(); ok {
			break
		}
		if attempt == 2 {
			t.Fatalf("the export of %d records finished before the kill, twice: the test killed nothing", len(k.ids))
		}
		t.Logf("the export of %d records finished before the kill; again with twice as many", len(k.ids))
		k.grow(len(k.ids))
	}
	var killedRows int64
	for _, f := range killed.Files {
		killedRows += f.Rows
	}
	temps, unnamed := exportLeftovers(t, k.dir, killed)
	t.Logf("killed with %d of %d records in %d files named by the manifest; left %d temporaries %v and %d unnamed files %v",
		killedRows, len(k.ids), len(killed.Files), len(temps), temps, len(unnamed), unnamed)
	if len(temps)+len(unnamed) == 0 { // a temporary was there just before the kill
		t.Logf("the kill left neither a temporary nor an unnamed file: the file under way was named just before it")
	}
	if _, err := os.Stat(filepath.Join(k.data, echostore.GraftDir, "LOCK")); err == nil {
		t.Logf("the killed export left the data dir's lock file")
	}

	// The next export opens the data dir (the lock itself died with the
	// killed process: Pebble's fcntl lock, released by the kernel; a lock
	// still held would fail the open after the CLI's 10 s wait) and
	// completes the folder.
	start := time.Now()
	res := k.export()
	t.Logf("the export after the kill: %d records in %d files, %v", res.Rows, len(res.Files), time.Since(start).Round(time.Millisecond))
	if res.ResumedAfter == nil || killed.Watermark == nil || *res.ResumedAfter != *killed.Watermark {
		t.Fatalf("the export after the kill resumed after %v; want the killed one's watermark %v", res.ResumedAfter, killed.Watermark)
	}
	if res.Rows != int64(len(k.ids))-killedRows {
		t.Fatalf("the export after the kill wrote %d records; want the %d the killed one had not named", res.Rows, int64(len(k.ids))-killedRows)
	}
	if temps, unnamed := exportLeftovers(t, k.dir, readManifest(t, k.dir)); len(temps)+len(unnamed) > 0 {
		t.Fatalf("after the export: temporaries %v and files the manifest does not name %v are left", temps, unnamed)
	}
	k.check()
}

// killedExport is the data dir, stream and export folder of
// TestExportKilled, and the ids of the stream's records in order.
type killedExport struct {
	t                      *testing.T
	bin, data, remote, dir string
	ref                    names.StreamRef
	ids                    []string
}

// exportRowsPerFile is the file size of TestExportKilled's exports: a
// dozen files of its 300,000 records, so that the kill lands after the
// manifest named one.
const exportRowsPerFile = 25_000

// grow appends n records to the stream, the first half of them archived
// (one cycle, the last 100 of that half left live) and the second half
// live, so that an export reads across the seam; through a node that is
// closed after, so that the CLI opens the data dir.
func (k *killedExport) grow(n int) {
	t := k.t
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: k.data, Redis: redisURL, Remote: k.remote})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 10_000
	recs := make([][]echostore.Field, batch)
	for b := 0; b < n/batch; b++ {
		for i := range recs {
			j := len(k.ids) + i
			recs[i] = []echostore.Field{{Name: "n", Value: strconv.Itoa(j)}, {Name: "kind", Value: []string{"order", "refund"}[j%2]},
				{Name: "blob", Value: string([]byte{0, 0xff, byte(j), byte(j >> 8)})}}
		}
		res, err := node.Append(ctx, k.ref, recs)
		if err != nil {
			t.Fatal(err)
		}
		k.ids = append(k.ids, res.IDs...)
		if b == n/batch/2-1 {
			if _, err := node.Cycle(ctx, k.ref, echostore.CycleOptions{Window: echostore.Window{Keep: 100}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// command is `echostore export` of the stream into the folder.
func (k *killedExport) command(ctx context.Context) *exec.Cmd {
	return exec.CommandContext(ctx, k.bin, "--data", k.data, "--redis", redisURL, "--remote", k.remote,
		"export", k.ref.Queue().String(), k.ref.Stream().String(), "--dir", k.dir, "--rows-per-file", strconv.Itoa(exportRowsPerFile))
}

// exportAndKill starts an export and kills it once the manifest names a
// file and a temporary of the next is in the folder, and returns the
// manifest the kill left. It returns false if the export finished first
// (its manifest names every record, or it exited before the kill).
func (k *killedExport) exportAndKill() (echostore.ExportManifestFile, bool) {
	t := k.t
	cmd := k.command(t.Context())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !midExport(k.dir) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("echostore export: %v\n%s", err, stderr.Bytes())
			}
			return echostore.ExportManifestFile{}, false
		case <-deadline.C:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("no file of the export in 20 s\n%s", stderr.Bytes())
		case <-tick.C:
		}
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	err := <-done
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		if err != nil {
			t.Fatalf("echostore export: %v\n%s", err, stderr.Bytes())
		}
		return echostore.ExportManifestFile{}, false // it exited before the kill
	}
	m := readManifest(t, k.dir)
	var rows int64
	for _, f := range m.Files {
		rows += f.Rows
	}
	return m, rows < int64(len(k.ids))
}

// midExport reports whether the manifest in dir names a file and a
// temporary of another is there: an export in the middle of a file.
func midExport(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	temp := false
	for _, e := range ents {
		temp = temp || strings.HasPrefix(e.Name(), ".part-") && strings.HasSuffix(e.Name(), ".tmp")
	}
	if !temp {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, echostore.ExportManifest))
	if err != nil {
		return false
	}
	var m echostore.ExportManifestFile
	return json.Unmarshal(b, &m) == nil && len(m.Files) > 0
}

// export runs an export to its end and returns what it printed.
func (k *killedExport) export() echostore.ExportResult {
	t := k.t
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := k.command(ctx)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("echostore export: %v\n%s%s", err, out, stderr.Bytes())
	}
	var res echostore.ExportResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("echostore export printed %q: %v", out, err)
	}
	return res
}

// readManifest returns the manifest of the export in dir.
func readManifest(t *testing.T, dir string) echostore.ExportManifestFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, echostore.ExportManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m echostore.ExportManifestFile
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v\n%s", echostore.ExportManifest, err, b)
	}
	return m
}

// exportLeftovers returns the temporaries in dir and the files there
// that are neither m's manifest nor a file m names.
func exportLeftovers(t *testing.T, dir string, m echostore.ExportManifestFile) (temps, unnamed []string) {
	t.Helper()
	named := map[string]bool{echostore.ExportManifest: true}
	for _, f := range m.Files {
		named[f.Name] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch name := e.Name(); {
		case named[name]:
		case strings.HasSuffix(name, ".tmp"):
			temps = append(temps, name)
		default:
			unnamed = append(unnamed, name)
		}
	}
	return temps, unnamed
}

// check reads the files the folder's manifest names, in its order, and
// fails unless their ids are the stream's, each once, in order, and each
// file holds the rows the manifest says.
func (k *killedExport) check() {
	t := k.t
	m := readManifest(t, k.dir)
	var sum int64
	for _, f := range m.Files {
		sum += f.Rows
	}
	if sum != int64(len(k.ids)) {
		t.Errorf("the manifest's %d files hold %d records; the stream has %d", len(m.Files), sum, len(k.ids))
	}
	type row struct {
		ID string `parquet:"id"`
	}
	var got []string
	seen := make(map[string]string, len(k.ids))
	twice := 0
	for _, f := range m.Files {
		rows, err := parquet.ReadFile[row](filepath.Join(k.dir, f.Name))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if int64(len(rows)) != f.Rows {
			t.Errorf("%s holds %d records; the manifest says %d", f.Name, len(rows), f.Rows)
		}
		for _, r := range rows {
			if in, ok := seen[r.ID]; ok {
				if twice++; twice <= 5 {
					t.Errorf("%s is in %s and in %s", r.ID, in, f.Name)
				}
				continue
			}
			seen[r.ID] = f.Name
			got = append(got, r.ID)
		}
	}
	if twice > 0 {
		t.Errorf("%d records are in the files twice", twice)
	}
	missing := 0
	for _, id := range k.ids {
		if _, ok := seen[id]; !ok {
			if missing++; missing <= 5 {
				t.Errorf("%s is in no file", id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of the stream's %d records are in no file", missing, len(k.ids))
	}
	if len(got) != len(seen) || len(seen) != len(k.ids) {
		return
	}
	for i := range got {
		if got[i] != k.ids[i] {
			t.Fatalf("record %d of the files is %s; the stream's is %s", i, got[i], k.ids[i])
		}
	}
	t.Logf("the folder's %d files hold the stream's %d records, each once, in order", len(m.Files), len(got))
}
