package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// dirEntries lists a directory's entries (nil if it does not exist).
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// TestRestoreCommandRefuses: `echostore restore` refuses, exit status 2 and
// nothing created or changed, a wrong command line, a remote inside the
// data dir (the default one) and a data dir that holds something.
func TestRestoreCommandRefuses(t *testing.T) {
	root := t.TempDir()
	rurl := "file://" + filepath.Join(root, "remote")
	busy := filepath.Join(root, "busy")
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "keep.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(root, "fresh")
	for _, tc := range []struct {
		args []string
		data string
		want string // in stderr
	}{
		{[]string{"restore", "--remote", rurl, "extra"}, fresh, "unknown command"},
		{[]string{"restore", "--remote", rurl, "--node", "-1"}, fresh, "--node -1"},
		{[]string{"restore", "--remote", rurl, "--node", "1024"}, fresh, "--node 1024"},
		{[]string{"restore", "--remote", rurl, "--bogus"}, fresh, "unknown flag"},
		{[]string{"restore"}, fresh, "remote outside the data directory"},
		{[]string{"restore", "--remote", "file://" + filepath.Join(fresh, "remote")}, fresh, "remote outside the data directory"},
		{[]string{"restore", "--remote", rurl}, busy, "not empty: " + busy + ": it holds keep.txt"},
		{[]string{"restore", "--remote", rurl, "--json"}, busy, "--force"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(slices.Clone(tc.args), "--data", tc.data, "--redis", "redis://127.0.0.1:1")
			if code := execute(context.Background(), args, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q, want it to say %q", stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("a refused restore printed %q", stdout.String())
			}
			if e := dirEntries(t, fresh); e != nil {
				t.Fatalf("a refused restore created %v", e)
			}
			if e := dirEntries(t, busy); !slices.Equal(e, []string{"keep.txt"}) {
				t.Fatalf("a refused restore changed the data dir: %v", e)
			}
		})
	}
}

// TestRestoreCommand: a node folds a stream (trim after remote) and takes
// sync jobs; its data dir is deleted; `echostore restore` rebuilds it from
// the remote and reports the volumes in text (and in JSON with --json, on
// another data dir); the restored data dir reads every record back and
// holds every job; a second restore into it is refused, and --force
// restores into it, pulling what it has.
func TestRestoreCommand(t *testing.T) {
	redis := startRedis(t).URL
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: redis, Remote: rurl})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := names.ParseStreamRef("q", "s")
	if err != nil {
		t.Fatal(err)
	}
	var batch [][]echostore.Field
	for i := range 50 {
		batch = append(batch, []echostore.Field{{Name: "i", Value: fmt.Sprint(i)}, {Name: "pad", Value: strings.Repeat("x", 2000)}})
	}
	ar, err := n.Append(ctx, ref, batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 5}, TrimAfter: echostore.TrimAfterRemote}); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for i := range 3 {
		rc, err := n.Enqueue(ctx, ref.Queue(), fmt.Appendf(nil, `{"i":%d}`, i), echostore.EnqueueOptions{Mode: echostore.Sync})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, rc.ID)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}

	out, stderr, err := run(t, "", "restore", "--data", data, "--remote", rurl, "--redis", redis)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, stderr)
	}
	for _, want := range []string{"restored 2 volumes from " + rurl, "fetched before the first read", "VOLUME", "accept.q.0", "archive.q.s"} {
		if !strings.Contains(out, want) {
			t.Fatalf("text report lacks %q:\n%s", want, out)
		}
	}
	out, stderr, err = run(t, "", "restore", "--data", filepath.Join(root, "second"), "--remote", rurl, "--json")
	if err != nil {
		t.Fatalf("restore --json: %v\n%s", err, stderr)
	}
	var rep echostore.RestoreResult
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("restore --json: %v: %s", err, out)
	}
	if !strings.HasPrefix(out, `{"data":`) || !rep.Restored || len(rep.Volumes) != 2 || rep.Volumes[0].Volume != "accept.q.0" ||
		rep.Volumes[1].Volume != "archive.q.s" || rep.Volumes[1].RemoteLSN != 1 || rep.Volumes[1].Pages != 45 || rep.Volumes[1].UnfetchedFrames == 0 {
		t.Fatalf("restore --json: %s", out)
	}

	// The restored data dir: every record, every job.
	out, stderr, err = run(t, "", "stream", "read", "q", "s", "--data", data, "--remote", rurl, "--redis", redis)
	if err != nil {
		t.Fatalf("stream read: %v\n%s", err, stderr)
	}
	if got := lines(out); len(got) != len(ar.IDs) {
		t.Fatalf("stream read after the restore: %d records, want %d", len(got), len(ar.IDs))
	}
	out, stderr, err = run(t, "", "queue", "claim", "q", "--count", "10", "--data", data, "--remote", rurl, "--redis", redis)
	if err != nil {
		t.Fatalf("queue claim: %v\n%s", err, stderr)
	}
	for _, id := range jobs {
		if !strings.Contains(out, id) {
			t.Fatalf("sync job %s not claimable after the restore: %s", id, out)
		}
	}

	// Restored once: refused again, restored into with --force.
	var so, se bytes.Buffer
	if code := execute(ctx, []string{"restore", "--data", data, "--remote", rurl, "--redis", redis}, &so, &se); code != 2 ||
		!strings.Contains(se.String(), "holds a store") {
		t.Fatalf("restore into the restored data dir: exit %d, %s; want 2 and the store named", code, se.String())
	}
	out, stderr, err = run(t, "", "restore", "--data", data, "--remote", rurl, "--redis", redis, "--force")
	if err != nil || !strings.Contains(out, "was in the data dir: pulled") {
		t.Fatalf("restore --force: %v\n%s\n%s", err, out, stderr)
	}
}

// startServeArgs runs the echostore binary's serve with the global
// arguments g and serve's own arguments a, and returns once it listens; err
// is its exit error if it ended at start, its log in the serveProc. The
// test's end stops it.
func startServeArgs(t *testing.T, g, a []string) (*serveProc, error) {
	t.Helper()
	p := &serveProc{done: make(chan struct{})}
	p.cmd = exec.Command(childBinary(t, false), append(append(slices.Clone(g), "serve", "--listen", "127.0.0.1:0"), a...)...)
	p.cmd.Env = childEnviron("echostore")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for p.addr == "" && sc.Scan() {
		p.write(sc.Text())
		if m := listenAddrRe.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "serve: listening") {
			p.addr = m[1]
		}
	}
	if p.addr == "" {
		close(p.done)
		return p, p.cmd.Wait()
	}
	go func() {
		defer close(p.done)
		for sc.Scan() {
			p.write(sc.Text())
		}
	}()
	t.Cleanup(func() { p.stop(t) })
	return p, nil
}

// TestServeRestore: the echostore binary's `serve --restore` on a deleted
// data dir restores it (its log says what) and serves every record; after
// another loss, `echostore restore` and then a plain serve do the same;
// `serve --restore` on a data dir that holds something else exits 2.
func TestServeRestore(t *testing.T) {
	redis := startRedis(t).URL
	root := t.TempDir()
	data, rurl := filepath.Join(root, "data"), "file://"+filepath.Join(root, "remote")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: redis, Remote: rurl})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := names.ParseStreamRef("q", "s")
	if err != nil {
		t.Fatal(err)
	}
	var batch [][]echostore.Field
	for i := range 30 {
		batch = append(batch, []echostore.Field{{Name: "i", Value: fmt.Sprint(i)}})
	}
	ar, err := n.Append(ctx, ref, batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 3}, TrimAfter: echostore.TrimAfterRemote}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Enqueue(ctx, ref.Queue(), []byte(`{}`), echostore.EnqueueOptions{Mode: echostore.Sync}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	g := []string{"--redis", redis, "--data", data, "--remote", rurl}
	readThroughServe := func(p *serveProc) {
		t.Helper()
		out, stderr, err := run(t, "", append(slices.Clone(g), "stream", "read", "q", "s")...)
		if err != nil {
			t.Fatalf("stream read through serve: %v\n%s\nserve's log:\n%s", err, stderr, p.logText())
		}
		if got := lines(out); len(got) != len(ar.IDs) {
			t.Fatalf("stream read through the restored serve: %d records, want %d", len(got), len(ar.IDs))
		}
	}
	for _, via := range []string{"serve --restore", "echostore restore"} {
		if err := os.RemoveAll(data); err != nil {
			t.Fatal(err)
		}
		var a []string
		if via == "serve --restore" {
			a = []string{"--restore"}
		} else if out, stderr, err := run(t, "", append(slices.Clone(g), "restore")...); err != nil || !strings.Contains(out, "restored 2 volumes") {
			t.Fatalf("restore: %v\n%s\n%s", err, out, stderr)
		}
		p, err := startServeArgs(t, g, a)
		if err != nil {
			t.Fatalf("%s: serve ended: %v\n%s", via, err, p.logText())
		}
		if via == "serve --restore" && !strings.Contains(p.logText(), `msg="restore: done" volumes=2`) {
			t.Fatalf("serve --restore logged no restore of the two volumes:\n%s", p.logText())
		}
		readThroughServe(p)
		p.stop(t)
	}
	// A data dir with a store: serve --restore opens it as it is.
	p, err := startServeArgs(t, g, []string{"--restore"})
	if err != nil || !strings.Contains(p.logText(), "restore: not needed") {
		t.Fatalf("serve --restore on a store: %v\n%s", err, p.logText())
	}
	readThroughServe(p)
	p.stop(t)
	// One that holds something else: exit 2, nothing created.
	other := filepath.Join(root, "other")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "keep.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = startServeArgs(t, []string{"--redis", redis, "--data", other, "--remote", rurl, "--token-file", ""}, []string{"--restore"})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.logText(), "not empty") {
		t.Fatalf("serve --restore on a data dir with a file: %v, want exit 2 and the refusal\n%s", err, p.logText())
	}
	if e := dirEntries(t, other); !slices.Equal(e, []string{"keep.txt"}) {
		t.Fatalf("a refused serve --restore changed the data dir: %v", e)
	}
}
