package echostore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestExportKeyStreamDuckDB: the export of a stream at a key, written by
// an application's XADDs with binary values and folded as it grows, is
// one table to DuckDB whose count, first and last id and group-by equal
// the merge-read's; an export after 10,000 more records writes only
// those. 20,000 records here; 1M with ECHOSTORE_EXPORT_SCALE=1.
func TestExportKeyStreamDuckDB(t *testing.T) {
	ctx := t.Context()
	n := 20_000
	if os.Getenv("ECHOSTORE_EXPORT_SCALE") == "1" {
		n = 1_000_000
	}
	const more = 10_000
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	key := fmt.Sprintf("app:export:%d", rand.Uint64())
	ref, err := names.ParseKeyRef(key)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// add XADDs records [from, from+count) and folds all but the last
	// thousand of the key's entries after each 100,000.
	add := func(from, count int) {
		t.Helper()
		const batch = 5_000
		for b := from; b < from+count; b += batch {
			p := rdb.Pipeline()
			for k := b; k < min(b+batch, from+count); k++ {
				blob := make([]byte, 8+rng.IntN(24))
				for i := range blob {
					blob[i] = byte(rng.Uint32())
				}
				blob[0], blob[1] = 0, 0xff
				p.XAdd(ctx, &goredis.XAddArgs{Stream: key, ID: "*", Values: []string{"kind", []string{"order", "refund", "probe"}[k%3], "blob", string(blob)}})
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if (b+batch-from)%100_000 == 0 || b+batch >= from+count {
				if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1000}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// mergeRead is the merge-read's answers: the count, the first and the
	// last id, and the records of each kind.
	mergeRead := func() (int, string, string, map[string]int) {
		t.Helper()
		var count int
		var first, last string
		kinds := map[string]int{}
		for r, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if count == 0 {
				first = echostore.FormatID(ref, r.ID)
			}
			last = echostore.FormatID(ref, r.ID)
			count++
			for _, f := range r.Fields {
				if f.Name == "kind" {
					kinds[f.Value]++
				}
			}
		}
		return count, first, last, kinds
	}
	dir := t.TempDir()
	table := fmt.Sprintf("read_parquet('%s', union_by_name = true)", filepath.Join(dir, "*.parquet"))
	// order is a Redis id's order in DuckDB: its ms, then its seq (as
	// text, 5-10 sorts after 5-9).
	const order = "[split_part(redis_id, '-', 1)::ubigint, split_part(redis_id, '-', 2)::ubigint]"
	// check holds DuckDB's answers over the folder to the merge-read's.
	check := func() {
		t.Helper()
		count, first, last, kinds := mergeRead()
		got := duckdb(t, "select count(*) as n, min_by(redis_id, "+order+") as first, max_by(redis_id, "+order+") as last, count(distinct id) as ids, "+
			"count(*) filter (where list_filter(fields, x -> x.name = 'blob'::blob)[1].value[1:2] = '\\x00\\xFF'::blob) as binary from "+table)
		if len(got) != 1 || got[0]["n"] != fmt.Sprint(count) || got[0]["ids"] != fmt.Sprint(count) || got[0]["binary"] != fmt.Sprint(count) ||
			got[0]["first"] != first || got[0]["last"] != last {
			t.Fatalf("DuckDB: %v; the merge-read: %d records, %s … %s", got, count, first, last)
		}
		groups := checkKinds(t, table, kinds)
		t.Logf("DuckDB over %d records: %v %v", count, got, groups)
	}

	add(0, n)
	if live, err := rdb.XLen(ctx, key).Result(); err != nil || live > 1000+5_000 {
		t.Fatalf("%s holds %d live entries (%v): the cycles did not fold it", key, live, err)
	}
	res, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir})
	if err != nil || res.Rows != int64(n) {
		t.Fatalf("export: %d rows, %v; want %d", res.Rows, err, n)
	}
	check()
	add(n, more)
	again, err := node.Export(ctx, ref, echostore.ExportOptions{Dir: dir})
	if err != nil || again.Rows != more || again.ResumedAfter == nil || *again.ResumedAfter != *res.Watermark {
		t.Fatalf("second export: %d rows after %v, %v; want the %d new ones after %s", again.Rows, again.ResumedAfter, err, more, *res.Watermark)
	}
	check()
}
