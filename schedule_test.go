package echostore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// runNode opens a node on a fresh data dir and a file:// remote, and
// returns it with a function that runs it (Node.Run) until the test ends,
// each beat followed by a send on beats.
func runNode(t *testing.T) (node *echostore.Node, run func(opts echostore.BeatOptions) (beats <-chan struct{})) {
	t.Helper()
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	run = func(opts echostore.BeatOptions) <-chan struct{} {
		beats := make(chan struct{}, 1)
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- node.Run(runCtx, echostore.RunOptions{Beat: 5 * time.Millisecond, BeatFunc: func(ctx context.Context) {
				node.Beat(ctx, opts)
				select {
				case beats <- struct{}{}:
				default:
				}
			}})
		}()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		return beats
	}
	t.Cleanup(func() { node.Close(context.Background()) })
	return node, run
}

// streamRef returns a stream of a queue named after the test.
func streamRef(t *testing.T, stream string) names.StreamRef {
	t.Helper()
	ref, err := names.ParseStreamRef(fmt.Sprintf("sched-%d", time.Now().UnixNano()), stream)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// appendN appends n records to ref.
func appendN(t *testing.T, node *echostore.Node, ref names.StreamRef, n int) {
	t.Helper()
	recs := make([][]echostore.Field, n)
	for i := range recs {
		recs[i] = []echostore.Field{{Name: "n", Value: fmt.Sprint(i)}}
	}
	if _, err := node.Append(t.Context(), ref, recs); err != nil {
		t.Fatal(err)
	}
}

// waitBeats waits for k beats, failing the test after a minute.
func waitBeats(t *testing.T, beats <-chan struct{}, k int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for range k {
		select {
		case <-beats:
		case <-deadline:
			t.Fatalf("fewer than %d beats in a minute", k)
		}
	}
}

// TestRunBoundsDeclaredStreams: with no serve, Run keeps an archived stream
// to its window by archive cycles (every record still read back, in order)
// and a trim-only stream by retention, and reports each.
func TestRunBoundsDeclaredStreams(t *testing.T) {
	node, run := runNode(t)
	ctx := t.Context()
	archived, trimOnly := streamRef(t, "archived"), streamRef(t, "trimmed")
	if err := node.Declare(archived, echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := node.Declare(trimOnly, echostore.StreamPolicy{Window: echostore.Window{Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	if got := node.Declared(); len(got) != 2 {
		t.Fatalf("declared %+v, want the two streams", got)
	}
	appendN(t, node, archived, 20)
	appendN(t, node, trimOnly, 10)
	cycled, trims := make(chan echostore.CycleReport, 64), make(chan echostore.TrimReport, 64)
	beats := run(echostore.BeatOptions{
		OnCycle: func(r echostore.CycleReport) { cycled <- r },
		OnTrim:  func(r echostore.TrimReport) { trims <- r },
	})
	waitBeats(t, beats, 2) // the first beat bounds both; the second finds nothing to do
	st, err := node.Status(ctx, archived)
	if err != nil {
		t.Fatal(err)
	}
	if st.Archived != 17 || st.Live != 3 {
		t.Fatalf("archived stream: %d archived, %d live; want 17 and 3", st.Archived, st.Live)
	}
	var n int
	for rec, err := range node.Read(ctx, archived, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := rec.Get("n"); v != fmt.Sprint(n) {
			t.Fatalf("record %d reads %q", n, v)
		}
		n++
	}
	if n != 20 {
		t.Fatalf("read back %d records, want 20", n)
	}
	live := 0
	for _, err := range node.Read(ctx, trimOnly, echostore.ReadOptions{Side: echostore.ReadLiveOnly}) {
		if err != nil {
			t.Fatal(err)
		}
		live++
	}
	if live != 2 {
		t.Fatalf("trim-only stream holds %d entries, want 2", live)
	}
	if r := <-cycled; r.Ref != archived || r.Err != nil || r.Result.Folded != 17 {
		t.Fatalf("first cycle report %+v, want 17 folded of %s", r, archived)
	}
	if r := <-trims; r.Ref != trimOnly || r.Err != nil || r.Result.Trimmed != 8 {
		t.Fatalf("first trim report %+v, want 8 trimmed of %s", r, trimOnly)
	}
}

// TestDeleteWhileRunning: a stream deleted while Run runs is no longer
// declared, and no later beat makes its volume again.
func TestDeleteWhileRunning(t *testing.T) {
	node, run := runNode(t)
	ctx := t.Context()
	ref := streamRef(t, "deleted")
	if err := node.Declare(ref, echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	appendN(t, node, ref, 5)
	beats := run(echostore.BeatOptions{})
	waitBeats(t, beats, 2)
	res, err := node.Delete(ctx, ref)
	if err != nil || !res.VolumeDropped {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if got := node.Declared(); len(got) != 0 {
		t.Fatalf("declared after the delete: %+v", got)
	}
	appendN(t, node, ref, 3) // the key again: an undeclared stream is left alone
	waitBeats(t, beats, 3)
	vols, err := node.Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		if v.Volume == ref.Volume() {
			t.Fatalf("a beat made the deleted stream's volume again: %+v", v)
		}
	}
}

// TestDeclareReplaces: declaring a stream again with another policy moves
// it: an archived stream declared trim-only is trimmed by retention and no
// longer cycled.
func TestDeclareReplaces(t *testing.T) {
	node, run := runNode(t)
	ref := streamRef(t, "moved")
	if err := node.Declare(ref, echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	p := echostore.StreamPolicy{Window: echostore.Window{Keep: 4}}
	if err := node.Declare(ref, p); err != nil {
		t.Fatal(err)
	}
	if got := node.Declared(); len(got) != 1 || got[0].Policy != p {
		t.Fatalf("declared %+v, want %s with %+v alone", got, ref, p)
	}
	appendN(t, node, ref, 6)
	cycled := make(chan echostore.CycleReport, 64)
	trims := make(chan echostore.TrimReport, 64)
	beats := run(echostore.BeatOptions{
		OnCycle: func(r echostore.CycleReport) { cycled <- r },
		OnTrim:  func(r echostore.TrimReport) { trims <- r },
	})
	waitBeats(t, beats, 2)
	if len(cycled) != 0 {
		t.Fatalf("a trim-only stream was archive-cycled: %+v", <-cycled)
	}
	if r := <-trims; r.Ref != ref || r.Result.Trimmed != 2 {
		t.Fatalf("trim report %+v, want 2 trimmed", r)
	}
	if p, ok := node.Undeclare(ref); !ok || p.Window.Keep != 4 {
		t.Fatalf("Undeclare: %+v, %v", p, ok)
	}
	if _, ok := node.Undeclare(ref); ok {
		t.Fatal("a second Undeclare found the stream")
	}
}

// TestRunNeedsRedis: a node without Redis has nothing to keep bounded:
// Declare and Run fail with ErrNoRedis.
func TestRunNeedsRedis(t *testing.T) {
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(ctx)
	if err := node.Declare(streamRef(t, "s"), echostore.StreamPolicy{}); !errors.Is(err, echostore.ErrNoRedis) {
		t.Fatalf("Declare: %v, want ErrNoRedis", err)
	}
	if err := node.Run(ctx, echostore.RunOptions{}); !errors.Is(err, echostore.ErrNoRedis) {
		t.Fatalf("Run: %v, want ErrNoRedis", err)
	}
}

// TestRunCheckpointsOutbox: a node whose outbox keeps no time bound of its
// own (Config.FlushInterval -1, as serve opens it) makes an async job
// durable by Run's checkpoints (RunOptions.CheckpointEvery), each reported.
func TestRunCheckpointsOutbox(t *testing.T) {
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir(), FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	q, err := names.ParseQueue(fmt.Sprintf("ckpt-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Enqueue(ctx, q, []byte(`{"n":1}`), echostore.EnqueueOptions{Mode: echostore.Async}); err != nil {
		t.Fatal(err)
	}
	if st, _ := node.OutboxStats(); st.Appended == st.Durable {
		t.Fatalf("the async job is durable before any checkpoint: %+v", st)
	}
	checkpoints := make(chan error, 16)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- node.Run(runCtx, echostore.RunOptions{Beat: time.Hour, CheckpointEvery: 5 * time.Millisecond,
			OnCheckpoint: func(took time.Duration, err error) { checkpoints <- err }})
	}()
	select {
	case err := <-checkpoints:
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no checkpoint within a minute")
	}
	if st, _ := node.OutboxStats(); st.Appended != st.Durable {
		t.Fatalf("after a checkpoint the outbox holds records not durable: %+v", st)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestDeclareTrimOnlyAgain: a trim-only stream declared again with other
// archive-only fields (TrimAfter, Retain) stays trimmed: its one retention
// entry is replaced, not forgotten.
func TestDeclareTrimOnlyAgain(t *testing.T) {
	node, run := runNode(t)
	ref := streamRef(t, "again")
	if err := node.Declare(ref, echostore.StreamPolicy{Window: echostore.Window{Keep: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := node.Declare(ref, echostore.StreamPolicy{Window: echostore.Window{Keep: 2}, TrimAfter: echostore.TrimAfterRemote}); err != nil {
		t.Fatal(err)
	}
	appendN(t, node, ref, 6)
	trims := make(chan echostore.TrimReport, 64)
	beats := run(echostore.BeatOptions{OnTrim: func(r echostore.TrimReport) { trims <- r }})
	waitBeats(t, beats, 2)
	select {
	case r := <-trims:
		if r.Ref != ref || r.Result.Trimmed != 4 {
			t.Fatalf("trim report %+v, want 4 trimmed of %s", r, ref)
		}
	default:
		t.Fatal("two beats and no trim: the stream declared again was forgotten")
	}
}

// TestCloseEndsRun: Close ends a Run whose context is still live, after the
// beat in flight, and no beat cycles the closed node's streams.
func TestCloseEndsRun(t *testing.T) {
	ctx := t.Context()
	node, err := echostore.Open(ctx, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ref := streamRef(t, "closed")
	if err := node.Declare(ref, echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 1}}); err != nil {
		t.Fatal(err)
	}
	appendN(t, node, ref, 3)
	cycled := make(chan echostore.CycleReport, 1024)
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, echostore.RunOptions{Beat: time.Millisecond, BeatOptions: echostore.BeatOptions{
			OnCycle: func(r echostore.CycleReport) { cycled <- r }}})
	}()
	select {
	case <-cycled:
	case <-time.After(time.Minute):
		t.Fatal("no cycle within a minute")
	}
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run still runs a minute after Close")
	}
	for len(cycled) > 0 {
		if r := <-cycled; r.Err != nil {
			t.Fatalf("a cycle met the closing node: %+v", r)
		}
	}
}
