package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// malformedCase is one request of the corpus in testdata/malformed (see
// testdata/malformed/README for the format).
type malformedCase struct {
	file, name   string
	line         int
	method, path string
	header       http.Header
	body         []byte
	status       int
	code         string
}

// placeholder values of the corpus: {q} and {s} are names of their own for
// each case (a queue and a stream that do not exist), {q0}/s a queue and a
// stream that do (with records and a job), {job0} that job's id, {k0} a
// key stream with records, {hash0} and {str0} keys that hold a hash and a
// string, {hashs} a stream of {q0} whose key holds a hash.
type corpusVars struct{ q0, s0, job0, k0, hash0, str0, hashs string }

var repeatRE = regexp.MustCompile(`\{rep (\d+) ([^}]*)\}`)

// expand replaces the placeholders of s for case number n.
func (v corpusVars) expand(s string, n int) string {
	s = strings.NewReplacer("{q0}", v.q0, "{s0}", v.s0, "{job0}", v.job0, "{k0}", v.k0,
		"{hash0}", v.hash0, "{str0}", v.str0, "{hashs}", v.hashs,
		"{q}", fmt.Sprintf("%s.new%d", v.q0, n), "{s}", fmt.Sprintf("new%d", n)).Replace(s)
	return repeatRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := repeatRE.FindStringSubmatch(m)
		k, _ := strconv.Atoi(sub[1])
		return strings.Repeat(sub[2], k)
	})
}

// parseCorpus reads every case of the files in dir.
func parseCorpus(t *testing.T, dir string, v corpusVars) []malformedCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s (%v)", dir, err)
	}
	var out []malformedCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c *malformedCase
		state := "" // "request", "header", "body"
		var body []string
		quoted := false
		fail := func(n int, format string, a ...any) {
			t.Helper()
			t.Fatalf("%s:%d: %s", filepath.Base(f), n, fmt.Sprintf(format, a...))
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case state == "" && (line == "" || strings.HasPrefix(line, "#")):
			case state == "" && strings.HasPrefix(line, "=== "):
				c = &malformedCase{file: filepath.Base(f), name: strings.TrimPrefix(line, "=== "), line: n, header: http.Header{}}
				state, body, quoted = "request", nil, false
			case state == "":
				fail(n, "want a case (=== name), got %q", line)
			case state == "request":
				method, path, ok := strings.Cut(line, " ")
				if !ok || method == "" || !strings.HasPrefix(path, "/") {
					fail(n, "want METHOD /path, got %q", line)
				}
				c.method, c.path = method, v.expand(path, len(out))
				state = "header"
			case state == "header" && line == "":
				state = "body"
			case state == "header" && line == "!quoted":
				quoted = true
			case state == "header":
				k, val, ok := strings.Cut(line, ":")
				if !ok {
					fail(n, "want Header: value, !quoted or an empty line, got %q", line)
				}
				c.header.Add(strings.TrimSpace(k), strings.TrimSpace(val))
			case (state == "header" || state == "body") && strings.HasPrefix(line, "--- "):
				want := strings.Fields(strings.TrimPrefix(line, "--- "))
				if len(want) != 2 {
					fail(n, "want --- STATUS code, got %q", line)
				}
				if c.status, err = strconv.Atoi(want[0]); err != nil || c.status < 400 || c.status > 499 {
					fail(n, "status %q: the corpus holds client mistakes, 4xx", want[0])
				}
				c.code = want[1]
				text := v.expand(strings.Join(body, "\n"), len(out))
				if quoted {
					if text, err = strconv.Unquote(`"` + text + `"`); err != nil {
						fail(n, "!quoted body: %v", err)
					}
				}
				c.body = []byte(text)
				out = append(out, *c)
				state = ""
			case state == "body":
				body = append(body, line)
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if state != "" {
			t.Fatalf("%s: the last case %q has no --- STATUS code line", filepath.Base(f), c.name)
		}
	}
	return out
}

// TestMalformedCorpus sends every request of testdata/malformed to a real
// serve (its own redis-server, a file:// remote, a real listener) and checks
// that each answers its 4xx status and error code, never a 5xx, and changes
// nothing: the Redis keys and their lengths, the volumes and their heads,
// and the outbox are the same after each request as before it.
func TestMalformedCorpus(t *testing.T) {
	rd, err := testserver.StartRedis(t.Context(), testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { rd.Stop() })
	e := start(t, Config{Redis: rd.URL, MaxBody: 64 << 10})
	v := corpusVars{q0: queueName(t), s0: "s"}
	v.k0, v.hash0, v.str0, v.hashs = v.q0+".k0", v.q0+".hash0", v.q0+".str0", "hashs"
	appendN(e, v.q0, v.s0, 0, 5)
	for i := range 3 {
		e.must("POST", "/v1/keys/"+v.k0, fmt.Sprintf(`{"fields":{"n":"%d"}}`, i))
	}
	redisDo(t, rd.URL, "HSET", v.hash0, "a", "1")
	redisDo(t, rd.URL, "SET", v.str0, "x")
	redisDo(t, rd.URL, "HSET", "emq:{"+v.q0+"}:stream:"+v.hashs, "a", "1")
	var job struct{ ID string }
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+v.q0+"/jobs?mode=sync", `{"payload":{"n":1}}`), &job); err != nil {
		t.Fatal(err)
	}
	v.job0 = job.ID
	// The job's dispatch follows its push in the background: wait (with a
	// deadline) until it is done, so that nothing changes during the corpus.
	for deadline := time.Now().Add(30 * time.Second); e.srv.outboxLen() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the setup job was not dispatched within 30s")
		}
	}
	cases := parseCorpus(t, filepath.Join("testdata", "malformed"), v)
	cases = append(cases, generatedCases(e.patterns(), v)...)
	if len(cases) < 100 {
		t.Fatalf("the corpus has %d cases, want at least 100", len(cases))
	}
	before := e.fingerprint(rd.URL)
	for _, c := range cases {
		req, err := http.NewRequestWithContext(t.Context(), c.method, e.base+c.path, bytes.NewReader(c.body))
		if err != nil {
			t.Fatalf("%s:%d %s: %v", c.file, c.line, c.name, err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, vs := range c.header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s:%d %s: %v", c.file, c.line, c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb struct {
			Error struct{ Code, Message string }
		}
		jerr := json.Unmarshal(b, &eb)
		if resp.StatusCode != c.status || jerr != nil || eb.Error.Code != c.code || eb.Error.Message == "" {
			t.Errorf("%s:%d %s: %s %s: got %d %.300s, want %d %s with a message",
				c.file, c.line, c.name, c.method, clipPath(c.path), resp.StatusCode, b, c.status, c.code)
			before = e.fingerprint(rd.URL) // what it did is its own failure, not the next case's
			continue
		}
		if after := e.fingerprint(rd.URL); !slices.Equal(after, before) {
			t.Fatalf("%s:%d %s: the refused request changed state:\nbefore %v\nafter  %v", c.file, c.line, c.name, before, after)
		}
	}
	t.Logf("%d malformed requests, each refused with its 4xx and no side effect", len(cases))
}

func clipPath(p string) string {
	if len(p) > 120 {
		return p[:120] + "…"
	}
	return p
}

// fingerprint is the state a refused request must not change: every Redis
// key with its type and length, every volume with its head, the outbox's
// intents.
func (e *env) fingerprint(redisURL string) []string {
	e.t.Helper()
	var out []string
	for _, k := range redisKeys(e.t, redisURL) {
		typ := strings.TrimPrefix(redisDo(e.t, redisURL, "TYPE", k), "+")
		n := ""
		switch typ {
		case "stream":
			n = redisDo(e.t, redisURL, "XLEN", k)
		case "zset":
			n = redisDo(e.t, redisURL, "ZCARD", k)
		case "hash":
			n = redisDo(e.t, redisURL, "HLEN", k)
		case "set":
			n = redisDo(e.t, redisURL, "SCARD", k)
		}
		out = append(out, k+" "+typ+n)
	}
	vols, err := e.srv.node.Volumes(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		out = append(out, fmt.Sprintf("volume %s %+v", v.Volume, v.GraftInfo))
	}
	out = append(out, fmt.Sprintf("outbox %d", e.srv.outboxLen()))
	slices.Sort(out)
	return out
}

// redisKeys lists the keys of the Redis at redisURL (a private server of a
// few keys: KEYS is fine).
func redisKeys(t *testing.T, redisURL string) []string {
	t.Helper()
	return redisArray(t, redisURL, "KEYS", "*")
}

// redisArray sends one command whose reply is an array of bulk strings and
// returns them.
func redisArray(t *testing.T, redisURL string, args ...string) []string {
	t.Helper()
	conn := redisConn(t, redisURL, args...)
	defer conn.Close()
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "*") {
		t.Fatalf("%v: reply %q (%v)", args, head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	out := make([]string, 0, n)
	for range n {
		l, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(l, "$") {
			t.Fatalf("%v: element %q (%v)", args, l, err)
		}
		size, _ := strconv.Atoi(strings.TrimSpace(l[1:]))
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b[:size]))
	}
	return out
}
