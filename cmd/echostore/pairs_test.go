package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/echostore/echostore/mq"
)

// pairRecords are records only the pair form of append input holds:
// bytes that are not UTF-8 in names and values, repeated names, empty
// names and values, and a plain record beside them.
var pairRecords = [][]mq.Field{
	{{Name: "bin", Value: "\xff\xfe\x00\x80"}, {Name: "\xc3", Value: "v"}},
	{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}, {Name: "a", Value: ""}},
	{{Name: "", Value: ""}, {Name: "<&>", Value: "\u2028\x7f"}},
	{{Name: "plain", Value: "x"}},
}

// inputLines renders records as append input, {"fields":…} lines, in the
// forms a read prints them (the pair form for the first three).
func inputLines(records [][]mq.Field) string {
	var b []byte
	for _, f := range records {
		b = append(mq.AppendFieldsJSON(append(b, `{"fields":`...), f), "}\n"...)
	}
	return string(b)
}

// readBack parses the JSON lines of a read and returns their fields, and
// the lines without their ids, as append input.
func readBack(t *testing.T, out string) ([][]mq.Field, string) {
	t.Helper()
	var fields [][]mq.Field
	for _, line := range lines(out) {
		var r mq.Record
		if err := r.UnmarshalJSON([]byte(line)); err != nil {
			t.Fatalf("read printed %q: %v", line, err)
		}
		fields = append(fields, r.Fields)
	}
	return fields, inputLines(fields)
}

// TestAppendPairForm: `stream append --jsonl` takes the pair form of
// fields, [[name, value],…] with {"b64":…} bytes, so what a read prints
// appends back byte for byte: read → append → read gives the same fields,
// directly and through serve's HTTP append route, for a stream of a queue
// and a stream at a key, live and after a cycle archived them. The object
// form still refuses repeated names.
func TestAppendPairForm(t *testing.T) {
	r := startRedis(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	remoteURL := "file://" + filepath.Join(dir, "remote")
	g := []string{"--redis", r.URL, "--data", data, "--remote", remoteURL}
	src := inputLines(pairRecords)
	if strings.Count(src, `"b64"`) != 2 || !strings.Contains(src, `[["a","1"],["a","2"],["a",""]]`) {
		t.Fatalf("input does not exercise the pair form: %s", src)
	}
	roundTrip := func(t *testing.T, from, to []string) {
		t.Helper()
		cli := mustRun(t, g)
		in := func(stdin string, args ...string) string {
			t.Helper()
			out, stderr, err := run(t, stdin, append(append([]string{}, g...), args...)...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, stderr)
			}
			return out
		}
		if ids := lines(in(src, append(append([]string{"stream", "append"}, from...), "--jsonl", "-")...)); len(ids) != len(pairRecords) {
			t.Fatalf("append printed %d ids", len(ids))
		}
		got, again := readBack(t, cli(append([]string{"stream", "read"}, from...)...))
		if !reflect.DeepEqual(got, pairRecords) {
			t.Fatalf("read after append:\n got %q\nwant %q", got, pairRecords)
		}
		in(again, append(append([]string{"stream", "append"}, to...), "--jsonl", "-")...)
		// Archive half of the copy: the merge-read of both parts.
		cli(append(append([]string{"archive", "cycle"}, to...), "--keep", "2")...)
		out := cli(append([]string{"stream", "read"}, to...)...)
		if got, back := readBack(t, out); !reflect.DeepEqual(got, pairRecords) || back != again {
			t.Fatalf("read of the appended copy:\n got %q\nwant %q", got, pairRecords)
		}
		if arch := cli(append([]string{"stream", "read"}, append(to, "--archive-only")...)...); !strings.HasPrefix(out, arch) || len(lines(arch)) != 2 {
			t.Fatalf("archive-only read %q is not the first 2 of %q", arch, out)
		}
	}
	t.Run("direct", func(t *testing.T) {
		roundTrip(t, []string{"q", "s"}, []string{"--key", "copy"})
	})
	t.Run("serve", func(t *testing.T) {
		stop := startServe(t, r.URL, data, remoteURL, "")
		defer stop()
		roundTrip(t, []string{"--key", "src"}, []string{"q", "s2"})
	})
	// The object form is unchanged: it refuses repeated names.
	_, stderr, err := run(t, `{"fields":{"a":"1","a":"2"}}`+"\n", append(append([]string{}, g...), "stream", "append", "q", "s", "--jsonl", "-")...)
	if err == nil || !strings.Contains(err.Error()+stderr, "duplicate field name") {
		t.Fatalf("object form with a repeated name: %v, %s", err, stderr)
	}
	if bytes.Contains([]byte(src), []byte(`"id"`)) {
		t.Fatal("input lines hold an id")
	}
}
