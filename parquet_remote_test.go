package echostore_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft/remote/sealed"
)

// TestExportRemote: an export into the remote puts the files and the
// manifest under exports/<volume>/ of the bucket, where DuckDB reads
// them as one table equal to the merge-read; a repeated export puts only
// the new records; a folder and the remote at once, and an encrypted
// remote, are refused before anything is written.
func TestExportRemote(t *testing.T) {
	ctx := t.Context()
	bucket := t.TempDir()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + bucket})
	ref := streamRef(t, "to-remote")
	add := func(from, n int) {
		t.Helper()
		recs := make([][]echostore.Field, n)
		for i := range recs {
			recs[i] = []echostore.Field{{Name: "n", Value: fmt.Sprint(from + i)}, {Name: "blob", Value: string([]byte{0, 0xff, byte(i)})}}
		}
		if _, err := node.Append(ctx, ref, recs); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 500)
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 50}}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Export(ctx, ref, echostore.ExportOptions{Remote: true, Dir: t.TempDir()}); !errors.Is(err, echostore.ErrInvalid) {
		t.Fatalf("an export to a folder and the remote: %v, want ErrInvalid", err)
	}
	res, err := node.Export(ctx, ref, echostore.ExportOptions{Remote: true, RowsPerFile: 200})
	if err != nil || res.Rows != 500 || len(res.Files) != 3 {
		t.Fatalf("export into the remote: %+v, %v; want 500 rows in 3 files", res, err)
	}
	prefix := echostore.ExportPrefix(ref)
	if res.Manifest != prefix+echostore.ExportManifest {
		t.Fatalf("manifest at %q, want %q", res.Manifest, prefix+echostore.ExportManifest)
	}
	add(500, 20)
	again, err := node.Export(ctx, ref, echostore.ExportOptions{Remote: true, RowsPerFile: 200})
	if err != nil || again.Rows != 20 || again.ResumedAfter == nil || *again.ResumedAfter != *res.Watermark {
		t.Fatalf("second export: %+v, %v; want the 20 new records after %s", again, err, *res.Watermark)
	}
	folder := filepath.Join(bucket, filepath.FromSlash(prefix))
	manifest, err := os.ReadFile(filepath.Join(folder, echostore.ExportManifest))
	if err != nil || !bytes.Contains(manifest, []byte(*again.Watermark)) {
		t.Fatalf("the bucket's manifest: %v\n%s", err, manifest)
	}
	var count int
	var last string
	for r, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		count++
		last = echostore.FormatID(ref, r.ID)
	}
	got := duckdb(t, fmt.Sprintf("select count(*) as n, max(f_n) as top, arg_max(id, f_n) as last from read_parquet('%s', union_by_name = true)",
		filepath.Join(folder, "*.parquet")))
	if len(got) != 1 || got[0]["n"] != fmt.Sprint(count) || got[0]["top"] != fmt.Sprint(count-1) || got[0]["last"] != last {
		t.Fatalf("DuckDB over the bucket: %v; the merge-read: %d records, the last %s", got, count, last)
	}

	key, err := sealed.NewKey(bytes.Repeat([]byte{7}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := sealed.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	sealedBucket := t.TempDir()
	sn := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + sealedBucket, RemoteKeys: ring})
	sref := streamRef(t, "sealed")
	if _, err := sn.Append(ctx, sref, [][]echostore.Field{{{Name: "n", Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Export(ctx, sref, echostore.ExportOptions{Remote: true}); !errors.Is(err, echostore.ErrExportSealed) {
		t.Fatalf("an export into an encrypted remote: %v, want ErrExportSealed", err)
	}
	if _, err := os.Stat(filepath.Join(sealedBucket, "exports")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused export wrote into the bucket: %v", err)
	}
}
