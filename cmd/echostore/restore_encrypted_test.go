package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/server"
)

// TestRestoreEncrypted: serve with an encrypted file:// remote takes
// records (bytes that are not UTF-8 among them), folds them and pushes;
// serve stops and the data dir is lost. `echostore restore` without the
// key, or with another key, fails with an error that says so, exit status
// non-zero, no panic, and writes nothing into the data dir; with the key
// (--remote-key-file, or ECHOSTORE_REMOTE_KEY into another data dir) it
// restores, and every record reads back byte for byte, the archived ones
// fetched from the remote through the key.
func TestRestoreEncrypted(t *testing.T) {
	redis := startRedis(t).URL
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	key, _ := writeKey(t, "hex")
	other, _ := writeKey(t, "hex")
	g := []string{"--redis", redis, "--data", data, "--remote", rurl}
	withKey := append(slices.Clone(g), "--remote-key-file", key)

	var records [][]mq.Field
	for i := range 40 {
		records = append(records, []mq.Field{
			{Name: "i", Value: fmt.Sprint(i)},
			{Name: "bin", Value: "\xff\xfe\x00\x80" + strings.Repeat(string(rune('a'+i%26)), 500)},
		})
	}
	records = append(records, pairRecords...)
	_, stop := startServeConfig(t, server.Config{Redis: redis, Data: data, Remote: rurl, RemoteKeyFile: key})
	if out, stderr, err := run(t, inputLines(records), append(slices.Clone(withKey), "stream", "append", "q", "s", "--jsonl", "-")...); err != nil || len(lines(out)) != len(records) {
		t.Fatalf("append: %v\n%s\n%s", err, out, stderr)
	}
	cli := mustRun(t, withKey)
	cli("archive", "cycle", "q", "s", "--keep", "3", "--trim-after", "remote")
	want := cli("stream", "read", "q", "s")
	if got, _ := readBack(t, want); !reflect.DeepEqual(got, records) {
		t.Fatalf("read through serve:\n got %q\nwant %q", got, records)
	}
	stop()
	// The remote is encrypted: every object sealed with the key.
	if m, n := keysOf(t, "--remote", rurl, "--remote-key-file", key); n == 0 || m[keyID(t, key)] != n {
		t.Fatalf("remote keys: %v of %d objects, want every one sealed with the key", m, n)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}

	// Without the key, or with another: refused, nothing written.
	for _, tc := range []struct {
		what string
		args []string
		want string
	}{
		{"no key", g, "encrypted"},
		{"another key", append(slices.Clone(g), "--remote-key-file", other), "lacks"},
	} {
		var so, se bytes.Buffer
		code := execute(context.Background(), append(slices.Clone(tc.args), "restore"), &so, &se)
		if code == 0 || !strings.Contains(se.String(), tc.want) || strings.Contains(se.String(), "panic") {
			t.Fatalf("restore with %s: exit %d, %q; want an error saying %q", tc.what, code, se.String(), tc.want)
		}
		if so.Len() != 0 {
			t.Fatalf("restore with %s printed %q", tc.what, so.String())
		}
		if e := dirEntries(t, data); len(e) != 0 {
			t.Fatalf("restore with %s wrote %v into the data dir (%s)", tc.what, e, se.String())
		}
	}

	// With the key: restored, every record byte for byte.
	out, stderr, err := run(t, "", append(slices.Clone(withKey), "restore")...)
	if err != nil || !strings.Contains(out, "archive.q.s") {
		t.Fatalf("restore with the key: %v\n%s\n%s", err, out, stderr)
	}
	if got := cli("stream", "read", "q", "s"); got != want {
		t.Fatalf("read after the restore:\n got %q\nwant %q", got, want)
	}
	if got := cli("stream", "read", "q", "s", "--archive-only"); !strings.HasPrefix(want, got) || len(lines(got)) != len(records)-3 {
		t.Fatalf("archive-only read after the restore: %d records, want the first %d of the stream", len(lines(got)), len(records)-3)
	}
	// The key in ECHOSTORE_REMOTE_KEY restores as the file does.
	kb, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ECHOSTORE_REMOTE_KEY", strings.TrimSpace(string(kb)))
	second := filepath.Join(root, "second")
	if out, stderr, err := run(t, "", "--redis", redis, "--data", second, "--remote", rurl, "restore"); err != nil || !strings.Contains(out, "archive.q.s") {
		t.Fatalf("restore with ECHOSTORE_REMOTE_KEY: %v\n%s\n%s", err, out, stderr)
	}
	if got := mustRun(t, []string{"--redis", redis, "--data", second, "--remote", rurl})("stream", "read", "q", "s", "--archive-only"); !strings.HasPrefix(want, got) || len(lines(got)) != len(records)-3 {
		t.Fatalf("archive-only read of the second restore: %q", got)
	}
}
