package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// TestCLIHugeEntry: a 100 MiB entry XADDed by another client is folded
// and trimmed by `echostore archive cycle` and printed back byte-identical
// from the archive by `echostore stream read`.
func TestCLIHugeEntry(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	v := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), 100<<20/36+1)[:100<<20]
	for _, val := range []string{string(v), "after"} {
		if err := rdb.Do(ctx, rdb.B().Xadd().Key("huge").Id("*").FieldValue().FieldValue("v", val).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	g := []string{"--data", t.TempDir(), "--redis", r.URL}
	out, stderr, err := run(t, "", append([]string{"archive", "cycle", "--key", "huge", "--keep", "1"}, g...)...)
	var res struct{ Folded, Trimmed int }
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Folded != 1 || res.Trimmed != 1 {
		t.Fatalf("archive cycle: %q %v\n%s", out, err, stderr)
	}
	out, stderr, err = run(t, "", append([]string{"stream", "read", "--key", "huge", "--archive-only"}, g...)...)
	if err != nil {
		t.Fatalf("stream read: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rec struct{ Fields map[string]string }
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec.Fields["v"] != string(v) {
		t.Fatalf("stream read --archive-only: %d lines; want the 100 MiB entry byte-identical", len(lines))
	}
}
