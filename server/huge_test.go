package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// TestHugeEntryEveryDoor: a 100 MiB entry XADDed by another client into a
// key stream folds and is trimmed by a cycle, and reads back byte-identical
// from the archive through the HTTP API and through the RESP front.
func TestHugeEntryEveryDoor(t *testing.T) {
	e := start(t, Config{RESP: "127.0.0.1:0", MaxBody: 1 << 20})
	ctx := context.Background()
	dial := func(addr string) rueidis.Client {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	u, err := url.Parse(e.cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	rdb := dial(u.Host)
	key := queueName(t) + ".huge"
	v := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), 100<<20/36+1)[:100<<20]
	var ids []string
	for _, val := range []string{"before", string(v), "after"} {
		id, err := rdb.Do(ctx, rdb.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("v", val).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	p := "/v1/keys/" + url.PathEscape(key)
	var res struct{ Folded, Trimmed int64 }
	if err := json.Unmarshal(e.must("POST", p+"/cycle?keep=1", ""), &res); err != nil || res.Folded != 2 || res.Trimmed != 2 {
		t.Fatalf("cycle: %+v, %v", res, err)
	}
	if n, err := rdb.Do(ctx, rdb.B().Xlen().Key(key).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("XLEN after the cycle: %d, %v; want 1 (the entry is trimmed, from the archive alone now)", n, err)
	}

	// HTTP: the archive's copy, rendered as JSON.
	code, b := e.do("GET", p+"?archive_only=true&limit=2", "", nil)
	var recs []struct {
		ID     string
		Fields map[string]string
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			ID     string
			Fields map[string]string
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("GET %s: %d, a line of %d bytes (%.80s): %v", p, code, len(line), line, err)
		}
		recs = append(recs, r)
	}
	if code != 200 || len(recs) != 2 || len(recs[1].Fields) != 1 || recs[1].Fields["v"] != string(v) {
		t.Fatalf("GET %s: %d, %d records; want the 100 MiB entry byte-identical", p, code, len(recs))
	}

	// The RESP front: XRANGE of the entry's id merges the archive in.
	front := dial(e.srv.RESPAddr().String())
	got, err := front.Do(ctx, front.B().Xrange().Key(key).Start(ids[1]).End(ids[1]).Build()).AsXRange()
	if err != nil || len(got) != 1 || got[0].ID != ids[1] || got[0].FieldValues["v"] != string(v) {
		t.Fatalf("XRANGE through the front: %d entries, %v; want the 100 MiB entry byte-identical", len(got), err)
	}
}
