package echostore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/internal/testserver"
)

// duckdb runs query in DuckDB (its Node API) and returns the rows as
// JSON objects.
func duckdb(t *testing.T, query string) []map[string]any {
	t.Helper()
	mods, err := testserver.DuckDB(t.Context())
	if err != nil {
		testserver.Unavailable(t, err)
	}
	script := `const { DuckDBInstance } = require('@duckdb/node-api');
(async () => {
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const r = await con.runAndReadAll(process.env.DUCKDB_QUERY);
  process.stdout.write(JSON.stringify(r.getRowObjectsJson()));
})().catch((e) => { console.error(e.message); process.exit(1); });`
	cmd := exec.CommandContext(t.Context(), "node", "-e", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods, "DUCKDB_QUERY="+query)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("duckdb %q: %v\n%s", query, err, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("duckdb %q: %v\n%s", query, err, out)
	}
	return rows
}

// TestExportDuckDB: an export of a stream with binary values, its archive
// and its live tail, is one table to DuckDB whose count, first and last id
// and group-by equal the merge-read's; a repeated export after more
// records writes only those; the typing rule gives the int, double and
// text fields every record has a typed column and leaves the others in
// fields alone.
func TestExportDuckDB(t *testing.T) {
	ctx := t.Context()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	ref := streamRef(t, "export")
	add := func(from, n int) {
		t.Helper()
		recs := make([][]echostore.Field, n)
		for i := range recs {
			k := from + i
			recs[i] = []echostore.Field{
				{Name: "n", Value: fmt.Sprint(k)},
				{Name: "kind", Value: []string{"order", "refund", "probe"}[k%3]},
				{Name: "price", Value: fmt.Sprintf("%d.5", k)},
				{Name: "blob", Value: string([]byte{0, 0xff, byte(k), '\n'})},
			}
			if k%2 == 0 {
				recs[i] = append(recs[i], echostore.Field{Name: "even", Value: "yes"})
			}
		}
		if _, err := node.Append(ctx, ref, recs); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 1000)
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 100}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir, RowsPerFile: 300})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1000 || len(res.Files) != 4 || res.ResumedAfter != nil {
		t.Fatalf("first export: %d rows in %d files, resumed after %v; want 1000 in 4, a first export", res.Rows, len(res.Files), res.ResumedAfter)
	}
	for _, f := range res.Files {
		if got := fmt.Sprint(f.Typed); got != "[{kind string} {n int64} {price double}]" {
			t.Fatalf("%s: typed columns %s", f.Name, got)
		}
	}
	add(1000, 50)
	again, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir, RowsPerFile: 300})
	if err != nil {
		t.Fatal(err)
	}
	if again.Rows != 50 || len(again.Files) != 1 || again.ResumedAfter == nil || *again.ResumedAfter != *res.Watermark {
		t.Fatalf("second export: %d rows in %d files after %v; want the 50 new ones after %s", again.Rows, len(again.Files), again.ResumedAfter, *res.Watermark)
	}
	if none, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir}); err != nil || none.Rows != 0 || len(none.Files) != 0 {
		t.Fatalf("an export with nothing new: %+v, %v", none, err)
	}
	other := streamRef(t, "other")
	if _, err := node.Export(ctx, other, echostore.ExportOptions{Dir: dir}); !errors.Is(err, echostore.ErrExportMismatch) {
		t.Fatalf("another stream's export into the folder: %v, want ErrExportMismatch", err)
	}

	// The merge-read's answers.
	var ids []string
	kinds := map[string]int{}
	for r, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, echostore.FormatID(ref, r.ID))
		for _, f := range r.Fields {
			if f.Name == "kind" {
				kinds[f.Value]++
			}
		}
	}
	table := fmt.Sprintf("read_parquet('%s', union_by_name = true)", filepath.Join(dir, "*.parquet"))
	got := duckdb(t, "select count(*) as n, min(id) as first, max(id) as last, count(distinct id) as ids from "+table)
	if len(got) != 1 || got[0]["n"] != fmt.Sprint(len(ids)) || got[0]["ids"] != fmt.Sprint(len(ids)) ||
		got[0]["first"] != ids[0] || got[0]["last"] != ids[len(ids)-1] {
		t.Fatalf("DuckDB: %v; the merge-read: %d records, %s … %s", got, len(ids), ids[0], ids[len(ids)-1])
	}
	checkKinds(t, table, kinds)
	row := duckdb(t, "select f_n + 1 as next, f_price * 2 as twice, hex(list_filter(fields, x -> x.name = 'blob'::blob)[1].value) as blob, "+
		"len(list_filter(fields, x -> x.name = 'even'::blob)) as even from "+table+" where f_n = 7")
	if len(row) != 1 || row[0]["next"] != "8" || row[0]["twice"] != 15.0 || row[0]["blob"] != "00FF070A" || row[0]["even"] != "0" {
		t.Fatalf("DuckDB row of n = 7: %v", row)
	}
	manifest, err := os.ReadFile(res.Manifest)
	if err != nil || !strings.Contains(string(manifest), `"queue": "`+ref.Queue().String()+`"`) {
		t.Fatalf("manifest: %v\n%s", err, manifest)
	}
}

// checkKinds holds DuckDB's count of the records of each f_kind in table
// to the merge-read's kinds, and returns DuckDB's rows.
func checkKinds(t *testing.T, table string, kinds map[string]int) []map[string]any {
	t.Helper()
	groups := duckdb(t, "select f_kind as kind, count(*) as n from "+table+" group by f_kind order by f_kind")
	if len(groups) != len(kinds) {
		t.Fatalf("DuckDB groups %v, the merge-read's %v", groups, kinds)
	}
	for _, g := range groups {
		if g["n"] != fmt.Sprint(kinds[g["kind"].(string)]) {
			t.Fatalf("DuckDB groups %v, the merge-read's %v", groups, kinds)
		}
	}
	return groups
}
