package echostore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/durable"
)

// TestExportCrashLeftovers: an export that crashed after it placed a file
// and before the manifest named it (and in the middle of another file's
// temporary) is continued by the next export, after more records came,
// with no record twice and none missing in the folder's files: the file
// the manifest does not name and the temporary are removed first.
func TestExportCrashLeftovers(t *testing.T) {
	ctx := t.Context()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	ref := streamRef(t, "crash")
	add := func(from, n int) {
		t.Helper()
		recs := make([][]echostore.Field, n)
		for i := range recs {
			recs[i] = []echostore.Field{{Name: "n", Value: fmt.Sprint(from + i)}}
		}
		if _, err := node.Append(ctx, ref, recs); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 700)
	dir := t.TempDir()
	manifest := filepath.Join(dir, echostore.ExportManifest)
	var afterTwo []byte
	res, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir, RowsPerFile: 300, Progress: func(p echostore.ExportProgress) {
		if p.Files == 2 {
			var err error
			if afterTwo, err = os.ReadFile(manifest); err != nil {
				t.Error(err)
			}
		}
	}})
	if err != nil || len(res.Files) != 3 || res.Files[2].Rows != 100 {
		t.Fatalf("export: %+v, %v; want 3 files, the last of 100 records", res, err)
	}
	// The crash: the third file placed, the manifest still of two; a
	// temporary half written.
	if err := os.WriteFile(manifest, afterTwo, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".part-123.tmp")
	if err := os.WriteFile(tmp, []byte("PAR1 half"), 0o600); err != nil {
		t.Fatal(err)
	}
	// … and the manifest's own temporary, from a crash while it was saved.
	mtmp := manifest + durable.TempSuffix
	if err := os.WriteFile(mtmp, []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	add(700, 50)
	again, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir, RowsPerFile: 300})
	if err != nil || again.Rows != 150 || len(again.Files) != 1 {
		t.Fatalf("the export after the crash: %+v, %v; want the 150 records after the second file in one", again, err)
	}
	if _, err := os.Stat(filepath.Join(dir, res.Files[2].Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file the manifest did not name is still there: %v", err)
	}
	for _, p := range []string{tmp, mtmp} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the temporary %s is still there: %v", filepath.Base(p), err)
		}
	}
	// A crash while the manifest was saved, then an export with nothing
	// new (it saves no manifest): the temporary goes all the same.
	if err := os.WriteFile(mtmp, []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	if none, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir}); err != nil || none.Rows != 0 {
		t.Fatalf("an export with nothing new: %+v, %v", none, err)
	}
	if _, err := os.Stat(mtmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the manifest's temporary is still there after an export with nothing new: %v", err)
	}
	got := duckdb(t, fmt.Sprintf("select count(*) as n, count(distinct f_n) as ns, max(f_n) as top from read_parquet('%s', union_by_name = true)",
		filepath.Join(dir, "*.parquet")))
	if len(got) != 1 || got[0]["n"] != "750" || got[0]["ns"] != "750" || got[0]["top"] != "749" {
		t.Fatalf("DuckDB over the folder: %v; want 750 records, each once", got)
	}
}
