package mq

import (
	"reflect"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
	goldenfile "github.com/echostore/echostore/internal/golden"
)

// Golden file of what echostore keeps in Redis and prints (docs/FORMAT.md,
// "Redis keys" and "Record JSON"; "Upgrades"): key names, the JSON line of
// a record, and the entries of streams and job streams as Redis returns
// them (the archive's keys and seam cache: archive/testdata/golden). `go test ./mq -run Golden -update` rewrites it from
// the current code (internal/golden).

// TestGoldenRedisFormsV1 checks the key layout and the record JSON against
// hand-written expectations, the file against today's encoders, and that
// today's decoders read the entries written in this layout.
func TestGoldenRedisFormsV1(t *testing.T) {
	rec := Record{ID: brand.ID(1<<22 | 5).XID(), Fields: []Field{{Name: "z", Value: "last"}, {Name: "a", Value: ""}, {Name: "émoji", Value: "🙂 \"q\"\n<>&"}}}
	rows := []struct{ name, got, want string }{
		{"stream", StreamKey(mustRef(t, "q", "s")), "emq:{q}:stream:s"},
		{"archived set", ArchivedSetKey(mustQueue(t, "q")), "emq:{q}:archived"},
		{"lane", LaneKey("q", "events"), "emq:{q}:lane:events"},
		{"jobs", JobsKey(mustQueue(t, "q")), "emq:{q}:jobs"},
		{"dead letters", DeadKey(mustQueue(t, "q")), "emq:{q}:jobs:dead"},
		{"delayed", DelayedKey(mustQueue(t, "q")), "emq:{q}:jobs:delayed"},
		{"job ids", JobIDsKey(mustQueue(t, "q")), "emq:{q}:jobs:ids"},
		{"volume lsn lane", mustLane(t).Key, "emq:{vol.archive.q.s}:lane:lsn"},
		{"record json", string(AppendJSON(nil, rec)), `{"id":"EVT_0000000040005","fields":{"z":"last","a":"","émoji":"🙂 \"q\"\n\u003c\u003e\u0026"}}`},
	}
	var enc strings.Builder
	enc.WriteString("# Redis keys and the record JSON line, layout 1 (docs/FORMAT.md): name<TAB>value\n")
	for _, r := range rows {
		enc.WriteString(r.name + "\t" + r.got + "\n")
	}
	file := goldenfile.Bytes(t, "redis.v1.txt", true, []byte(enc.String()))
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")[1:]
	if len(lines) != len(rows) {
		t.Fatalf("%d lines, want %d", len(lines), len(rows))
	}
	for i, r := range rows {
		name, val, _ := strings.Cut(lines[i], "\t")
		if name != r.name || val != r.want {
			t.Fatalf("%s = %s, the spec gives %s", name, val, r.want)
		}
	}
	// The JSON line reads back as the record, fields in stored order.
	var back Record
	if err := back.UnmarshalJSON([]byte(rows[len(rows)-1].want)); err != nil || !reflect.DeepEqual(back, rec) {
		t.Fatalf("json: %+v, %v", back, err)
	}

	// Entries as Redis holds them, read by today's decoders.
	got, err := decodeEntry(StreamKey(mustRef(t, "q", "s")), "1704067200001-5", []string{"z", "last", "a", "", "émoji", "🙂 \"q\"\n<>&"})
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("stream entry: %+v, %v", got, err)
	}
	d, err := decodeJob(JobsKey(mustQueue(t, "q")), "1704067200002-0", []string{"job", "JOB_0000000080000", "attempt", "2", "task", "x"}, 0)
	if err != nil || d.ID != brand.ID(2<<22) || d.Attempt != 2 || d.EntryID != "1704067200002-0" || !reflect.DeepEqual(d.Fields, []Field{{Name: "task", Value: "x"}}) {
		t.Fatalf("job entry: %+v, %v", d, err)
	}
}

func mustLane(t *testing.T) Lane {
	l, err := VolumeLane(mustVolume(t, "archive.q.s"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}
