package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/mq"
)

// consumerGroup is an application's consumer group on stream s of queue q,
// read with its own client (go-redis).
type consumerGroup struct {
	t    *testing.T
	rdb  *redis.Client
	key  string
	name string
}

func newConsumerGroup(t *testing.T, e *env, q, s, name string) *consumerGroup {
	t.Helper()
	opt, err := redis.ParseURL(e.cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	key := mq.StreamKey(mustRef(t, q, s))
	if err := rdb.XGroupCreate(t.Context(), key, name, "0").Err(); err != nil {
		t.Fatal(err)
	}
	return &consumerGroup{t: t, rdb: rdb, key: key, name: name}
}

// read reads up to n new entries and, with ack, acknowledges them.
func (g *consumerGroup) read(n int64, ack bool) int {
	g.t.Helper()
	res, err := g.rdb.XReadGroup(g.t.Context(), &redis.XReadGroupArgs{Group: g.name, Consumer: "c", Streams: []string{g.key, ">"}, Count: n, Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		g.t.Fatal(err)
	}
	var ids []string
	for _, m := range res[0].Messages {
		ids = append(ids, m.ID)
	}
	if ack && len(ids) > 0 {
		if err := g.rdb.XAck(g.t.Context(), g.key, g.name, ids...).Err(); err != nil {
			g.t.Fatal(err)
		}
	}
	return len(ids)
}

// nextStalled returns the next "stalled" event of ev.
func nextStalled(t *testing.T, ev sse) StalledEvent {
	t.Helper()
	for {
		name, data, err := ev.next()
		if err != nil {
			t.Fatalf("events ended before a stalled event: %v", err)
		}
		if name != "stalled" {
			continue
		}
		var s StalledEvent
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// metric returns the line of /metrics that starts with series.
func (e *env) metric(series string) string {
	e.t.Helper()
	for _, l := range strings.Split(string(e.must("GET", "/metrics", "")), "\n") {
		if strings.HasPrefix(l, series+" ") {
			return l
		}
	}
	return ""
}

// TestStalledGroupAlarm: a consumer group that reads a few entries and
// stops raises the alarm on the cycle (the result, the gauge and counter,
// a "stalled" event, the archive status) while the stream keeps its
// entries; once it reads on, the alarm clears.
func TestStalledGroupAlarm(t *testing.T) {
	e := start(t, Config{Token: testToken})
	q := queueName(t)
	appendN(e, q, "s", 0, 20)
	g := newConsumerGroup(t, e, q, "s", "billing")
	g.read(3, false)

	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev := sse{bufio.NewReader(resp.Body)}

	var cyc struct {
		Folded, Trimmed int64
		StalledGroups   []archive.StalledGroup `json:"stalled_groups"`
	}
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5&max_live=10", ""), &cyc); err != nil {
		t.Fatal(err)
	}
	if cyc.Folded != 15 || cyc.Trimmed != 0 || len(cyc.StalledGroups) != 1 || cyc.StalledGroups[0].Group != "billing" ||
		cyc.StalledGroups[0].Held != 15 || cyc.StalledGroups[0].Pending != 3 || cyc.StalledGroups[0].Reason != archive.ReasonMaxLive {
		t.Fatalf("cycle: %+v", cyc)
	}
	labels := `{queue="` + q + `",stream="s"}`
	if got, want := e.metric("echostore_stream_stalled_groups"+labels), "echostore_stream_stalled_groups"+labels+" 1"; got != want {
		t.Fatalf("gauge: %q, want %q", got, want)
	}
	counter := `echostore_stream_stalled_group_cycles_total{policy="hold",queue="` + q + `",stream="s"}`
	if got := e.metric(counter); got != counter+" 1" {
		t.Fatalf("counter: %q", got)
	}
	if s := nextStalled(t, ev); s.Queue != q || s.Stream != "s" || s.Policy != "hold" || len(s.Groups) != 1 || s.Groups[0].Group != "billing" {
		t.Fatalf("stalled event: %+v", s)
	}
	var st struct {
		Live          int64
		StalledGroups []archive.StalledGroup `json:"stalled_groups"`
		StalledAt     *time.Time             `json:"stalled_at"`
	}
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/s/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Live != 20 || len(st.StalledGroups) != 1 || st.StalledGroups[0].Group != "billing" || st.StalledAt == nil {
		t.Fatalf("status: %+v", st)
	}

	// The group reads on: the alarm clears.
	g.read(1000, true)
	if err := g.rdb.XAck(t.Context(), g.key, g.name, pendingIDs(t, g)...).Err(); err != nil {
		t.Fatal(err)
	}
	cyc.StalledGroups = nil
	if err := json.Unmarshal(e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5&max_live=10", ""), &cyc); err != nil {
		t.Fatal(err)
	}
	if len(cyc.StalledGroups) != 0 || cyc.Trimmed != 15 {
		t.Fatalf("cycle after the group read on: %+v", cyc)
	}
	if got, want := e.metric("echostore_stream_stalled_groups"+labels), "echostore_stream_stalled_groups"+labels+" 0"; got != want {
		t.Fatalf("gauge after: %q, want %q", got, want)
	}
	if s := nextStalled(t, ev); len(s.Groups) != 0 {
		t.Fatalf("clearing event: %+v", s)
	}
	st.StalledGroups, st.StalledAt = nil, nil
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/s/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.StalledGroups) != 0 || st.StalledAt != nil {
		t.Fatalf("status after: %+v", st)
	}
}

// pendingIDs returns the ids group g has pending.
func pendingIDs(t *testing.T, g *consumerGroup) []string {
	t.Helper()
	p, err := g.rdb.XPendingExt(t.Context(), &redis.XPendingExtArgs{Stream: g.key, Group: g.name, Start: "-", End: "+", Count: 1000}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range p {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestStalledGroupsConfig: a declared stream's max_live and stalled_groups:
// archive reach its beat's cycles, which trim past the stalled group; a
// bad policy is a configuration error.
func TestStalledGroupsConfig(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{
		{Name: "s", Keep: 5, MaxLive: 4, MaxHold: -1, StalledGroups: "archive"},
	}}}})
	appendN(e, q, "s", 0, 20)
	g := newConsumerGroup(t, e, q, "s", "stuck")
	g.read(2, false)
	e.srv.Beat(t.Context())
	var st struct {
		Live          int64
		Archived      uint64
		StalledGroups []archive.StalledGroup `json:"stalled_groups"`
	}
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/s/archive", ""), &st); err != nil {
		t.Fatal(err)
	}
	if st.Live != 5 || st.Archived != 15 || len(st.StalledGroups) != 1 || !st.StalledGroups[0].Passed {
		t.Fatalf("status after the beat: %+v", st)
	}
	counter := `echostore_stream_stalled_group_cycles_total{policy="archive",queue="` + q + `",stream="s"}`
	if got := e.metric(counter); got != counter+" 1" {
		t.Fatalf("counter: %q", got)
	}
	// Every record is still read, from the archive and the live tail.
	if got := lines(e.must("GET", "/v1/streams/"+q+"/s", "")); len(got) != 20 {
		t.Fatalf("merge-read: %d records, want 20", len(got))
	}

	no := false
	for _, bad := range []Config{
		{Queues: []QueueConfig{{Name: "a", Streams: []StreamConfig{{Name: "s", StalledGroups: "later"}}}}},
		{Defaults: StreamConfig{StalledGroups: "drop"}},
		{Queues: []QueueConfig{{Name: "a", Streams: []StreamConfig{{Name: "s", Archived: &no, StalledGroups: "archive"}}}}},
	} {
		if _, err := checked(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	c, err := checked(Config{
		Defaults: StreamConfig{MaxLive: 7, StalledGroups: "archive"},
		Queues:   []QueueConfig{{Name: "a", Streams: []StreamConfig{{Name: "s", MaxHold: 2 * time.Hour}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.resolve(mustRef(t, "a", "s"), c.Queues[0].Streams[0])
	if err != nil || s.window.Groups != (archive.GroupLimits{MaxLive: 7, MaxHold: 2 * time.Hour, Stalled: archive.StalledArchive}) {
		t.Fatalf("resolved groups: %+v, %v", s.window.Groups, err)
	}
}

// TestGroupsRoute: the console's consumer groups of a stream, with their
// pending entries and lag, whether they hold the trim back, and the last
// cycle's verdict (a group past max_live is stalled; an idle one that has
// read and acknowledged everything holds nothing).
func TestGroupsRoute(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	appendN(e, q, "s", 0, 20)
	newConsumerGroup(t, e, q, "s", "billing").read(3, false)
	newConsumerGroup(t, e, q, "s", "audit").read(20, true)
	var before GroupList
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/s/groups", ""), &before); err != nil {
		t.Fatal(err)
	}
	if before.CheckedAt != "" || len(before.Groups) != 2 {
		t.Fatalf("groups before a cycle: %+v", before)
	}
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5&max_live=10", "")
	var got GroupList
	if err := json.Unmarshal(e.must("GET", "/v1/streams/"+q+"/s/groups", ""), &got); err != nil {
		t.Fatal(err)
	}
	if got.CheckedAt == "" || len(got.Groups) != 2 {
		t.Fatalf("groups: %+v", got)
	}
	audit, billing := got.Groups[0], got.Groups[1]
	if audit.Name != "audit" || audit.Pending != 0 || audit.Lag == nil || *audit.Lag != 0 || audit.HoldsTrim || audit.Stalled != "" {
		t.Fatalf("audit group: %+v", audit)
	}
	if billing.Name != "billing" || billing.Pending != 3 || billing.Lag == nil || *billing.Lag != 17 || !billing.HoldsTrim ||
		billing.Stalled != archive.ReasonMaxLive || billing.Consumers != 1 {
		t.Fatalf("billing group: %+v", billing)
	}
	if b := e.must("GET", "/v1/streams/"+q+"/none/groups", ""); string(b) != `{"groups":[],"checked_at":""}`+"\n" {
		t.Fatalf("groups of a stream that does not exist: %s", b)
	}
	code, b := e.do("GET", "/v1/streams/"+q+"/a:b/groups", "", nil)
	e.wantError(code, b, 400, CodeInvalidName)
}
