package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
	"github.com/echostore/echostore/xid"
)

// transcriptEnv names the file a script's echostore commands append their
// command line, stdout and exit status to (scriptMain), so that the two
// runs of a script can be compared byte for byte.
const transcriptEnv = "ECHOSTORE_TEST_TRANSCRIPT"

// scriptMain is the echostore command of the test scripts: main, with its
// stdout also written to the transcript.
func scriptMain() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var out bytes.Buffer
	code := execute(ctx, os.Args[1:], io.MultiWriter(os.Stdout, &out), os.Stderr)
	stop()
	if p := os.Getenv(transcriptEnv); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "transcript:", err)
			os.Exit(99)
		}
		line := strings.Join(os.Args[1:], " ")
		if w := os.Getenv("WORK"); w != "" {
			line = strings.ReplaceAll(line, w, "$WORK")
		}
		fmt.Fprintf(f, "$ echostore %s\n%s[exit %d]\n", line, bytes.ReplaceAll(out.Bytes(), []byte(os.Getenv("WORK")), []byte("$WORK")), code)
		f.Close()
	}
	os.Exit(code)
}

// scriptModes are the two ways every script runs: the commands open the
// data dir themselves, or `echostore serve` holds it and the commands that
// need it go through serve's unix socket.
var scriptModes = []string{"direct", "serve"}

// TestScripts runs the CLI's test scripts (testdata/script/*.txtar), each
// twice: directly, and with serve holding the data dir. Each run has its own
// redis-server, data dir and remote. The two runs of a script must print the
// same bytes on stdout and exit with the same statuses, command for command
// (ids, entry ids, hashes and times aside: each run mints its own; they are
// replaced by their order of first appearance before comparing).
// scriptHistory is how long the scripts' archive volumes keep their past
// states, serve's and the commands' alike.
const scriptHistory = time.Hour

func TestScripts(t *testing.T) {
	if _, err := testserver.RedisBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	transcripts := t.TempDir()
	for _, mode := range scriptModes {
		t.Run(mode, func(t *testing.T) {
			testscript.Run(t, testscript.Params{
				Dir:                 "testdata/script",
				RequireExplicitExec: true,
				RequireUniqueNames:  true,
				UpdateScripts:       os.Getenv("ECHOSTORE_UPDATE_SCRIPTS") == "1",
				Setup:               func(e *testscript.Env) error { return setupScript(e, mode, transcripts) },
				Condition: func(cond string) (bool, error) {
					if slices.Contains(scriptModes, cond) {
						return cond == mode, nil
					}
					return false, fmt.Errorf("unknown condition %q", cond)
				},
				Cmds: scriptCmds,
			})
		})
	}
	if t.Failed() {
		return
	}
	files, err := filepath.Glob(filepath.Join(transcripts, "direct", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no script wrote a transcript")
	}
	for _, f := range files {
		name := filepath.Base(f)
		direct, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		served, err := os.ReadFile(filepath.Join(transcripts, "serve", name))
		if err != nil {
			t.Fatalf("%s: no transcript of the run through serve: %v", name, err)
		}
		d, s := normalize(string(direct)), normalize(string(served))
		if d != s {
			t.Errorf("script %s printed different bytes through serve:\n%s", name, firstDiff(d, s))
		}
	}
}

// setupScript gives the script its own redis-server, data dir and remote
// (ECHOSTORE_REDIS, ECHOSTORE_DATA, ECHOSTORE_REMOTE) and, in mode "serve",
// starts serve on the data dir in this process, stopped at the script's end.
func setupScript(e *testscript.Env, mode, transcripts string) error {
	r, err := testserver.StartRedis(context.Background(), testserver.RedisConfig{})
	if err != nil {
		return err
	}
	e.Defer(func() { _ = r.Stop() })
	data := filepath.Join(e.WorkDir, "data")
	remoteURL := "file://" + filepath.Join(e.WorkDir, "remote")
	e.Setenv("ECHOSTORE_REDIS", r.URL)
	e.Setenv("ECHOSTORE_DATA", data)
	e.Setenv("ECHOSTORE_REMOTE", remoteURL)
	e.Setenv("REDIS_ADDR", r.Addr)
	// Every state of the last hour stays readable (stream read --as-of), in
	// both modes alike.
	e.Setenv("ECHOSTORE_HISTORY", scriptHistory.String())
	name := "script"
	if n, ok := e.T().(interface{ Name() string }); ok {
		name = filepath.Base(n.Name())
	}
	dir := filepath.Join(transcripts, mode)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	e.Setenv(transcriptEnv, filepath.Join(dir, name))
	if mode != "serve" {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, server.Config{
		Redis: r.URL, Data: data, Remote: remoteURL,
		Listen: "127.0.0.1:0", Beat: time.Hour, AllowEviction: true,
		// No background replication: a script prints what its commands
		// did, and a push in the background would make a volume's remote
		// LSN (and a delete's remote objects) depend on timing. Serve's
		// own replication is tested in faults and server.
		ReplicateEvery: -1,
		History:        scriptHistory,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		cancel()
		return fmt.Errorf("serve: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	e.Defer(func() {
		cancel()
		if err := <-done; err != nil {
			e.T().Fatal("serve: ", err)
		}
	})
	return nil
}

// scriptCmds are the commands the scripts have beside testscript's own.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// capture VAR [N]: set $VAR to line N (1-based; default: all, trimmed)
	// of the last command's stdout.
	"capture": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 1 || len(args) > 2 {
			ts.Fatalf("usage: capture VAR [LINE]")
		}
		out := strings.TrimRight(ts.ReadFile("stdout"), "\n")
		if len(args) == 2 {
			n, err := strconv.Atoi(args[1])
			ls := strings.Split(out, "\n")
			if err != nil || n < 1 || n > len(ls) {
				ts.Fatalf("capture %s %s: stdout has %d lines", args[0], args[1], len(ls))
			}
			out = ls[n-1]
		}
		ts.Setenv(args[0], out)
	},
	// jsonget VAR NAME: set $VAR to the string NAME of the JSON object on
	// the first line of the last command's stdout.
	"jsonget": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: jsonget VAR NAME")
		}
		line, _, _ := strings.Cut(ts.ReadFile("stdout"), "\n")
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			ts.Fatalf("jsonget %s: the first line of stdout, %q: %v", args[1], line, err)
		}
		s, ok := v[args[1]].(string)
		if !ok {
			ts.Fatalf("jsonget %s: no such string in %s", args[1], line)
		}
		ts.Setenv(args[0], s)
	},
	// failjob QUEUE MESSAGE: claim the next job of QUEUE for the consumer
	// "worker" and record a failed attempt of it, with one attempt allowed,
	// so that it is dead at once (queue fail runs with the queue's five
	// attempts: queue_jobs.txtar dead-letters a job that way).
	"failjob": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: failjob QUEUE MESSAGE")
		}
		ctx := context.Background()
		c, err := mq.Connect(ctx, mq.Options{URL: ts.Getenv("ECHOSTORE_REDIS"), Jobs: mq.JobOptions{MaxAttempts: 1}})
		ts.Check(err)
		defer c.Close()
		q, err := names.ParseQueue(args[0])
		ts.Check(err)
		ds, err := c.Claim(ctx, q, "worker", 1)
		ts.Check(err)
		if len(ds) != 1 {
			ts.Fatalf("failjob: no job to claim on %s", args[0])
		}
		_, err = c.Fail(ctx, q, "worker", ds[0], args[1])
		ts.Check(err)
	},
	// waitjobs QUEUE N: wait (10 s at most) until the job stream of QUEUE
	// holds N entries: a sync enqueue answers once its job is pushed, and
	// the job reaches the stream just after.
	"waitjobs": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: waitjobs QUEUE N")
		}
		want, err := strconv.Atoi(args[1])
		ts.Check(err)
		var got string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got, err = testserver.Do(context.Background(), ts.Getenv("REDIS_ADDR"), "XLEN", "emq:{"+args[0]+"}:jobs")
			ts.Check(err)
			if n, _ := strconv.Atoi(strings.TrimSpace(got)); n >= want {
				return
			}
		}
		ts.Fatalf("waitjobs %s %d: the job stream holds %s after 10s", args[0], want, got)
	},
	// xreadgroup KEY GROUP CONSUMER: read what the consumer group GROUP
	// has not delivered yet of the stream KEY with plain XREADGROUP (a
	// client nobody here wrote) and print each entry as stream read prints
	// a record (its Redis id as the branded id of the same bits).
	"xreadgroup": scriptXReadGroup,
	// redis ARG…: run a Redis command on the script's redis-server and
	// print its reply.
	"redis": func(ts *testscript.TestScript, neg bool, args []string) {
		v, err := testserver.Do(context.Background(), ts.Getenv("REDIS_ADDR"), args...)
		if neg {
			if err == nil {
				ts.Fatalf("redis %v succeeded", args)
			}
			return
		}
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%v\n", v)
	},
}

// scriptXReadGroup is the script command xreadgroup.
func scriptXReadGroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: xreadgroup KEY GROUP CONSUMER")
	}
	stdout := ts.Stdout() // nothing new is an empty stdout
	ctx := context.Background()
	opt, err := goredis.ParseURL(ts.Getenv("ECHOSTORE_REDIS"))
	ts.Check(err)
	opt.Protocol = 2 // replies as nested arrays, fields in their order
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	reply, err := rdb.Do(ctx, "XREADGROUP", "GROUP", args[1], args[2], "COUNT", "100000", "STREAMS", args[0], ">").Slice()
	if errors.Is(err, goredis.Nil) {
		return // nothing new
	}
	ts.Check(err)
	var out []byte
	for _, st := range reply {
		kv := st.([]any)
		for _, e := range kv[1].([]any) {
			ent := e.([]any)
			id, err := xid.Parse(ent[0].(string))
			ts.Check(err)
			flat := ent[1].([]any)
			rec := mq.Record{ID: id}
			for i := 0; i+1 < len(flat); i += 2 {
				rec.Fields = append(rec.Fields, mq.Field{Name: flat[i].(string), Value: flat[i+1].(string)})
			}
			out = append(mq.AppendJSON(out, rec), '\n')
		}
	}
	stdout.Write(out)
}

// Run-specific values in the transcripts: replaced by their kind and the
// order of their first appearance.
var volatile = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"ID", regexp.MustCompile(`\b[A-Z]{3}_[0-9A-Z]{13}\b`)},
	{"ENTRY", regexp.MustCompile(`\b[0-9]{12,}-[0-9]+\b`)},
	{"HASH", regexp.MustCompile(`"hash":"[^"]*"`)},
	{"TIME", regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)},
	{"AGE", regexp.MustCompile(`"age_seconds":[0-9.e+-]+`)},
	{"IDLE", regexp.MustCompile(`"idle_ms":[0-9]+`)},
}

// normalize replaces the run-specific values of a transcript.
func normalize(s string) string {
	for _, v := range volatile {
		seen := map[string]string{}
		s = v.re.ReplaceAllStringFunc(s, func(m string) string {
			if r, ok := seen[m]; ok {
				return r
			}
			r := fmt.Sprintf("<%s%d>", v.kind, len(seen)+1)
			seen[m] = r
			return r
		})
	}
	return s
}

// firstDiff shows the first line where two transcripts differ, with the
// command line above it.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	cmd := ""
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if strings.HasPrefix(x, "$ ") {
			cmd = x
		}
		if x != y {
			return fmt.Sprintf("%s\ndirect: %s\nserve:  %s", cmd, x, y)
		}
	}
	return "(no line differs)"
}

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
