package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/echostore/echostore/internal/testserver"
)

// sample is a request that a route answers with success (and, for the
// routes that change state, a change) when nothing is wrong with it: the
// boundary tests send it with one thing wrong and check that nothing
// changed.
type sample struct {
	path string // {q}, {s} and {vid} stand for the test's queue, stream and volume
	body string
}

// routeSamples has a sample for every route the server registers
// (TestBoundaryRoutesCovered checks it against the mux), so that a route
// added later cannot escape the matrices.
var routeSamples = map[string]sample{
	"POST /v1/streams/{q}/{s}":          {"/v1/streams/{q}/{s}", `{"fields":{"a":"b"}}`},
	"GET /v1/streams/{q}/{s}":           {"/v1/streams/{q}/{s}", ""},
	"DELETE /v1/streams/{q}/{s}":        {"/v1/streams/{q}/{s}?confirm=" + DeleteConfirm, ""},
	"POST /v1/streams/{q}/{s}/cycle":    {"/v1/streams/{q}/{s}/cycle?keep=1", ""},
	"GET /v1/streams/{q}/{s}/archive":   {"/v1/streams/{q}/{s}/archive", ""},
	"POST /v1/streams/{q}/{s}/replay":   {"/v1/streams/{q}/{s}/replay?", `{"into":"{q}.replay"}`},
	"POST /v1/streams/{q}/{s}/export":   {"/v1/streams/{q}/{s}/export?", `{}`},
	"POST /v1/keys/{k}":                 {"/v1/keys/key%3A{q}", `{"fields":{"a":"b"}}`},
	"GET /v1/keys/{k}":                  {"/v1/keys/key%3A{q}", ""},
	"DELETE /v1/keys/{k}":               {"/v1/keys/key%3A{q}?confirm=" + DeleteConfirm, ""},
	"POST /v1/keys/{k}/cycle":           {"/v1/keys/key%3A{q}/cycle?keep=1", ""},
	"GET /v1/keys/{k}/archive":          {"/v1/keys/key%3A{q}/archive", ""},
	"POST /v1/keys/{k}/replay":          {"/v1/keys/key%3A{q}/replay?", `{"into":"{q}.key-replay"}`},
	"POST /v1/keys/{k}/export":          {"/v1/keys/key%3A{q}/export?", `{}`},
	"GET /v1/queues/{q}":                {"/v1/queues/{q}", ""},
	"POST /v1/queues/{q}/jobs":          {"/v1/queues/{q}/jobs", `{"payload":{"n":1}}`},
	"POST /v1/queues/{q}/jobs/batch":    {"/v1/queues/{q}/jobs/batch", `{"jobs":[{"payload":{"n":1}}]}`},
	"POST /v1/queues/{q}/claim":         {"/v1/queues/{q}/claim?consumer=other&count=10&stalled=1ms", ""},
	"POST /v1/queues/{q}/ack":           {"/v1/queues/{q}/ack", `{"entries":["{entry}"]}`},
	"POST /v1/queues/{q}/fail":          {"/v1/queues/{q}/fail", `{"entry":"{entry}","attempt":1,"reason":"boom"}`},
	"GET /v1/queues/{q}/dead":           {"/v1/queues/{q}/dead", ""},
	"GET /v1/queues":                    {"/v1/queues", ""},
	"GET /v1/series":                    {"/v1/series", ""},
	"GET /v1/nodes":                     {"/v1/nodes", ""},
	"GET /v1/streams/{q}/{s}/groups":    {"/v1/streams/{q}/{s}/groups", ""},
	"GET /v1/keys/{k}/groups":           {"/v1/keys/key%3A{q}/groups", ""},
	"GET /v1/queues/{q}/jobs":           {"/v1/queues/{q}/jobs?state=pending", ""},
	"DELETE /v1/queues/{q}/dead":        {"/v1/queues/{q}/dead?confirm=" + DeleteDeadConfirm, `{"entries":["0-1"]}`},
	"POST /v1/queues/{q}/redrive":       {"/v1/queues/{q}/redrive", `{"all":true}`},
	"GET /v1/volumes":                   {"/v1/volumes", ""},
	"GET /v1/volumes/{vid}":             {"/v1/volumes/{vid}", ""},
	"POST /v1/volumes/{vid}/push":       {"/v1/volumes/{vid}/push", ""},
	"POST /v1/volumes/{vid}/pull":       {"/v1/volumes/{vid}/pull", ""},
	"POST /v1/volumes/{vid}/hydrate":    {"/v1/volumes/{vid}/hydrate", ""},
	"POST /v1/volumes/{vid}/reset":      {"/v1/volumes/{vid}/reset?to_remote=true", ""},
	"POST /v1/volumes/{vid}/checkpoint": {"/v1/volumes/{vid}/checkpoint", ""},
	"POST /v1/volumes/{vid}/gc":         {"/v1/volumes/{vid}/gc?keep_checkpoints=1&trim_log=true", ""},
	"POST /v1/streams/{q}/{s}/fault":    {"/v1/streams/{q}/{s}/fault", ""},
	"GET /v1/events":                    {"/v1/events", ""},
	"POST /v1/session":                  {"/v1/session", ""},
	"GET /healthz":                      {"/healthz", ""},
	"GET /metrics":                      {"/metrics", ""},
	"GET /{$}":                          {"/", ""},
}

// changesState reports whether a route's method is one that changes state.
func changesState(pattern string) bool {
	m, _, _ := strings.Cut(pattern, " ")
	return m != http.MethodGet && m != http.MethodHead
}

// stateRoutes are the routes of routeSamples that change state, sorted.
func stateRoutes() []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(routeSamples)) {
		if changesState(p) {
			out = append(out, p)
		}
	}
	return out
}

// testToken is a bearer token long enough for the server (MinTokenLen).
const testToken = "test-token-0123456789abcdef"

// bucketSeq numbers the buckets of the package's MinIO.
var bucketSeq atomic.Int64

// minioRemote returns the URL of a fresh bucket of the package's MinIO and
// sets the AWS environment that authenticates to it.
func minioRemote(t *testing.T) (string, *testserver.MinIO, string) {
	t.Helper()
	m := servers.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	name = fmt.Sprintf("%.40s-%d", strings.Trim(name, "-"), bucketSeq.Add(1))
	if err := m.CreateBucket(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return m.URL(name), m, name
}

// fixture is a server over real Redis and MinIO with a stream whose
// archive holds local commits not yet pushed (trim_after: local), records
// trimmed from Redis, a claimed job and a dispatched one.
type fixture struct {
	*env
	q, s, vid string
	entry     string // the entry id of the claimed job
	minio     *testserver.MinIO
	bucket    string
	redisAddr string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	rurl, m, bucket := minioRemote(t)
	q := queueName(t)
	cfg.Remote = rurl
	cfg.Queues = []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "s", Keep: 2, TrimAfter: "local"}}}}
	e := start(t, cfg)
	f := &fixture{env: e, q: q, s: "s", vid: "archive." + q + ".s", minio: m, bucket: bucket,
		redisAddr: strings.TrimSuffix(strings.TrimPrefix(e.cfg.Redis, "redis://"), "/0")}
	appendN(e, q, "s", 0, 10)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
	for range 2 {
		e.must("POST", "/v1/queues/"+q+"/jobs", `{"payload":{"n":0}}`)
	}
	// The jobs reach the job stream through the accept tier's dispatch.
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct{ Length int64 }
		if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil {
			t.Fatal(err)
		}
		if st.Length == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs never reached the job stream: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var claimed struct {
		Jobs []struct{ Entry string }
	}
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=owner&count=1", ""), &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	f.entry = claimed.Jobs[0].Entry
	return f
}

// path fills a sample's placeholders.
func (f *fixture) fill(s string) string {
	return strings.NewReplacer("{q}", f.q, "{s}", f.s, "{vid}", f.vid, "{entry}", f.entry).Replace(s)
}

// state is everything a request could change: every Redis key of the
// test's queue with its value, every volume's info, the remote's objects,
// the armed faults and the streams the server cycles.
func (f *fixture) state() string {
	f.t.Helper()
	ctx := f.t.Context()
	var b strings.Builder
	keys, err := testserver.Do(ctx, f.redisAddr, "KEYS", "*"+f.q+"*")
	if err != nil {
		f.t.Fatal(err)
	}
	ks := strings.Split(keys, "\n")
	slices.Sort(ks)
	for _, k := range ks {
		if k == "" {
			continue
		}
		v, err := testserver.Do(ctx, f.redisAddr, "DUMP", k)
		if err != nil {
			f.t.Fatal(err)
		}
		fmt.Fprintf(&b, "redis %s %x\n", k, v)
	}
	vols, err := f.srv.node.Volumes(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, in := range vols.Volumes {
		fmt.Fprintf(&b, "volume %s local %d remote %d sync %d pages %d horizon %d\n",
			in.Volume, in.LocalLSN, in.RemoteLSN, in.SyncLSN, in.Pages, in.Horizon)
	}
	out, err := f.minio.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(f.bucket)})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, o := range out.Contents {
		fmt.Fprintf(&b, "object %s %d\n", aws.ToString(o.Key), aws.ToInt64(o.Size))
	}
	faults := f.srv.node.Faults()
	f.srv.mu.Lock()
	fmt.Fprintf(&b, "faults %v streams %d\n", faults, len(f.srv.streams))
	f.srv.mu.Unlock()
	return b.String()
}

// settled waits until the state stops changing (the accept tier's commits
// and dispatch of the fixture's jobs are asynchronous) and returns it.
func (f *fixture) settled() string {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	prev := f.state()
	for {
		time.Sleep(20 * time.Millisecond)
		cur := f.state()
		if cur == prev {
			return cur
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the state never settled:\n%s\nthen\n%s", prev, cur)
		}
		prev = cur
	}
}

// raw sends a request with exactly the headers given (Host "" keeps the
// server's address) and returns the status, the error code of a JSON error
// body and the response headers. The body of an event stream is not read.
func (e *env) raw(method, path, host string, hdr map[string]string, body string) (int, string, http.Header) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, "", resp.Header
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	var eb struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(b, &eb)
	if resp.StatusCode >= 400 && (eb.Error.Code == "" || eb.Error.Message == "") {
		e.t.Errorf("%s %s: %d with a body that is not a JSON error: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, eb.Error.Code, resp.Header
}

// attack is one way a request is not the server's own caller's.
type attack struct {
	name   string
	host   func(f *fixture) string
	hdr    map[string]string // besides the token
	status int
	code   string
}

var attacks = []attack{
	{"foreign Origin", nil, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, "cross_site"},
	{"Origin null", nil, map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403, "cross_site"},
	{"Origin of another port", func(*fixture) string { return "" }, nil, 403, "cross_site"}, // hdr filled in by the test
	{"Sec-Fetch-Site cross-site", nil, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403, "cross_site"},
	{"Sec-Fetch-Site same-site", nil, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, 403, "cross_site"},
	{"text/plain body", nil, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
	{"form body", nil, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
	{"multipart body", nil, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"},
	{"no Content-Type", nil, map[string]string{}, 415, "unsupported_media_type"},
	{"foreign Host", func(f *fixture) string { return "evil.example:" + f.port() }, map[string]string{"Content-Type": "application/json"}, 421, "misdirected"},
	{"rebinding Host", func(f *fixture) string { return "127.0.0.1.nip.io:" + f.port() }, map[string]string{"Content-Type": "application/json"}, 421, "misdirected"},
}

func (f *fixture) port() string {
	_, p, _ := net.SplitHostPort(f.srv.Addr().String())
	return p
}

// TestBoundaryStateRoutesRefuseCrossSite: every route that changes state,
// sent as a web page (or a rebinding DNS name) can send it, is refused with
// its status and code and changes nothing (Redis keys, volumes, the
// remote's objects, armed faults), on a server with a token (the request
// carries it: only the boundary stops it) and without one. A page's
// simple request, text/plain as fetch(…, {mode: 'no-cors'}) sends it, to
// the reset route dropped the archive's unpushed commits before.
func TestBoundaryStateRoutesRefuseCrossSite(t *testing.T) {
	for _, token := range []string{"", "boundary-token-0123456789"} {
		t.Run(map[bool]string{true: "token", false: "no token"}[token != ""], func(t *testing.T) {
			f := newFixture(t, Config{Token: token, Faults: true})
			before := f.settled()
			for _, p := range stateRoutes() {
				method, _, _ := strings.Cut(p, " ")
				smp := routeSamples[p]
				for _, a := range attacks {
					hdr := map[string]string{}
					for k, v := range a.hdr {
						hdr[k] = v
					}
					if a.name == "Origin of another port" {
						hdr = map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}
					}
					if token != "" {
						hdr["Authorization"] = "Bearer " + token
					}
					host := ""
					if a.host != nil {
						host = a.host(f)
					}
					body := f.fill(smp.body)
					if body == "" && method == http.MethodPost {
						body = "x" // what a no-cors fetch or a form sends
					}
					if strings.Contains(a.name, "body") || a.name == "no Content-Type" {
						body = f.fill(smp.body) // the real body, as text/plain
					}
					code, ecode, _ := f.raw(method, f.fill(smp.path), host, hdr, body)
					if code != a.status || ecode != a.code {
						t.Errorf("%s with %s: %d %q, want %d %q", p, a.name, code, ecode, a.status, a.code)
					}
				}
			}
			if after := f.state(); after != before {
				t.Fatalf("refused requests changed the state:\n%s\nafter\n%s", before, after)
			}
			// The samples do change state when nothing is wrong with them:
			// the matrix above tests refusals that matter.
			f.proper(token)
			if after := f.state(); after == before {
				t.Fatal("the proper requests changed nothing: the samples test nothing")
			}
		})
	}
}

// proper sends every state-changing sample as the server's own client does
// (the delete last) and checks that each succeeds.
func (f *fixture) proper(token string) {
	f.t.Helper()
	routes := stateRoutes()
	slices.SortStableFunc(routes, func(a, b string) int { return routeRank(a) - routeRank(b) })
	for _, p := range routes {
		method, _, _ := strings.Cut(p, " ")
		smp := routeSamples[p]
		hdr := map[string]string{"Content-Type": "application/json", "Origin": f.base, "Sec-Fetch-Site": "same-origin"}
		if token != "" {
			hdr["Authorization"] = "Bearer " + token
		}
		if code, ecode, _ := f.raw(method, f.fill(smp.path), "", hdr, f.fill(smp.body)); code/100 != 2 {
			f.t.Errorf("%s, sent properly: %d %s", p, code, ecode)
		}
	}
}

// routeRank orders the proper requests of the route pattern p: the remote
// log's checkpoint and GC need a push before them, and the delete goes last
// (the requests after it would find no stream).
func routeRank(p string) int {
	switch {
	case strings.HasPrefix(p, "DELETE"):
		return 2
	case strings.HasSuffix(p, "/checkpoint"), strings.HasSuffix(p, "/gc"):
		return 1
	}
	return 0
}

// TestBoundaryNoCorsReset is finding 1 as a page does it: a simple
// request (text/plain, no preflight) to reset?to_remote=true on a
// trim_after: local stream, whose unpushed commits hold records already
// trimmed from Redis. It is refused and the merge-read keeps every record.
func TestBoundaryNoCorsReset(t *testing.T) {
	f := newFixture(t, Config{})
	_, want := f.do("GET", "/v1/streams/"+f.q+"/s", "", nil)
	if n := len(lines(want)); n != 10 {
		t.Fatalf("merge-read before: %d records, want 10", n)
	}
	code, ecode, _ := f.raw("POST", "/v1/volumes/"+f.vid+"/reset?to_remote=true", "", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, "x")
	if code != http.StatusUnsupportedMediaType || ecode != "unsupported_media_type" {
		t.Errorf("no-cors reset: %d %q, want 415 unsupported_media_type", code, ecode)
	}
	if code, got := f.do("GET", "/v1/streams/"+f.q+"/s", "", nil); code != 200 || string(got) != string(want) {
		t.Fatalf("merge-read after the refused reset: %d\n%s\nwant\n%s", code, got, want)
	}
}

// TestBoundaryReadsRefuseForeignHost: every route, reads, the dashboard,
// /metrics and /healthz included, refuses a Host that is not the server's
// (DNS rebinding: a page of evil.example whose name now resolves to
// 127.0.0.1 reads with its own origin), and answers the server's own names.
func TestBoundaryReadsRefuseForeignHost(t *testing.T) {
	for _, token := range []string{"", "boundary-token-0123456789"} {
		t.Run(map[bool]string{true: "token", false: "no token"}[token != ""], func(t *testing.T) {
			f := newFixture(t, Config{Token: token})
			hdr := map[string]string{}
			if token != "" {
				hdr["Authorization"] = "Bearer " + token
			}
			for _, p := range slices.Sorted(maps.Keys(routeSamples)) {
				method, _, _ := strings.Cut(p, " ")
				if changesState(p) {
					continue
				}
				path := f.fill(routeSamples[p].path)
				for _, host := range []string{"evil.example:" + f.port(), "evil.example", "localhost.evil.example:" + f.port(), "127.0.0.1:1"} {
					code, ecode, _ := f.raw(method, path, host, hdr, "")
					if code != http.StatusMisdirectedRequest || ecode != "misdirected" {
						t.Errorf("%s with Host %s: %d %q, want 421 misdirected", p, host, code, ecode)
					}
				}
				for _, host := range []string{"", "localhost:" + f.port(), "[::1]:" + f.port(), "127.0.0.1:" + f.port()} {
					if code, ecode, _ := f.raw(method, path, host, hdr, ""); code/100 != 2 {
						t.Errorf("%s with Host %q: %d %q, want 2xx", p, host, code, ecode)
					}
				}
			}
		})
	}
}

// TestBoundaryRefusalWithheldBody: a request refused before its body is
// read (by the boundary, or for its token) is answered at once and its
// connection closed, though the client withholds the body it announced:
// the server does not wait to drain it.
func TestBoundaryRefusalWithheldBody(t *testing.T) {
	e := start(t, Config{Token: testToken, BodyTimeout: time.Hour})
	addr := strings.TrimPrefix(e.base, "http://")
	for _, c := range []struct {
		hdr  string
		want int
	}{
		{"Host: evil.example\r\nContent-Type: application/json", 421},
		{"Host: " + addr + "\r\nContent-Type: text/plain", 415},
		{"Host: " + addr + "\r\nContent-Type: application/json", 401},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Guard only: the test fails, rather than hangs, if the server
		// never answers.
		conn.SetDeadline(time.Now().Add(time.Minute))
		fmt.Fprintf(conn, "POST /v1/streams/q/s HTTP/1.1\r\n%s\r\nContent-Length: 100\r\n\r\n{", c.hdr)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.hdr, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != c.want || !resp.Close {
			t.Errorf("%q: %s (close %v), want %d and the connection closed", c.hdr, resp.Status, resp.Close, c.want)
		}
	}
}
