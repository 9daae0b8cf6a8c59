package echostore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// tempDir returns a new temporary directory; cleanup removes it.
func tempDir() (dir string, cleanup func()) {
	dir, err := os.MkdirTemp("", "echostore-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// record returns a record with one field.
func record(name, value string) []echostore.Field {
	return []echostore.Field{{Name: name, Value: value}}
}

// Append records to a stream, fold the older ones into the archive, and
// read the stream back: the merge-read serves the archive and the live
// tail as one ordered sequence.
func Example() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	ref, err := names.ParseStreamRef("example-orders", "created")
	if err != nil {
		log.Fatal(err)
	}
	for _, sku := range []string{"apple", "pear", "plum", "fig"} {
		if _, err := node.Append(ctx, ref, [][]echostore.Field{record("sku", sku)}); err != nil {
			log.Fatal(err)
		}
	}
	// Leave the newest record live, archive the rest.
	if _, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 1}}); err != nil {
		log.Fatal(err)
	}
	for rec, err := range node.Read(ctx, ref, echostore.ReadOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		sku, _ := rec.Get("sku")
		fmt.Println(sku)
	}
	fmt.Println("newest first:")
	for rec, err := range node.Read(ctx, ref, echostore.ReadOptions{Reverse: true, Limit: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		sku, _ := rec.Get("sku")
		fmt.Println(sku)
	}
	// Output:
	// apple
	// pear
	// plum
	// fig
	// newest first:
	// fig
	// plum
}

// A cycle folds what the window drops into the archive volume, then trims
// it from Redis; Status shows where the seam is.
func ExampleNode_Cycle() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	ref, err := names.ParseStreamRef("example-cycle", "events")
	if err != nil {
		log.Fatal(err)
	}
	recs := make([][]echostore.Field, 5)
	for i := range recs {
		recs[i] = record("n", fmt.Sprint(i))
	}
	if _, err := node.Append(ctx, ref, recs); err != nil {
		log.Fatal(err)
	}
	res, err := node.Cycle(ctx, ref, echostore.CycleOptions{Window: echostore.Window{Keep: 2}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("folded", res.Folded, "trimmed", res.Trimmed)
	st, err := node.Status(ctx, ref)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("archived", st.Archived, "live", st.Live)
	fmt.Println("volume", st.Volume)
	// Output:
	// folded 3 trimmed 3
	// archived 3 live 2
	// volume archive.example-cycle.events
}

// A sync enqueue answers once the job is pushed to the remote, an async
// one once it is in the outbox on local disk; a worker then claims the
// jobs and acknowledges them.
func ExampleNode_Enqueue() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	q, err := names.ParseQueue("example-mail")
	if err != nil {
		log.Fatal(err)
	}
	rc, err := node.Enqueue(ctx, q, []byte(`{"to":"ada"}`), echostore.EnqueueOptions{Mode: echostore.Sync})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rc.Mode, rc.LSN != nil, rc.Volume)
	rc, err = node.Enqueue(ctx, q, []byte(`{"to":"grace"}`), echostore.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rc.Mode, rc.LSN != nil)

	// The jobs reach the queue's job stream once committed and pushed; a
	// worker claims until it has both (or gives up).
	var jobs []echostore.Job
	for deadline := time.Now().Add(10 * time.Second); len(jobs) < 2 && time.Now().Before(deadline); {
		res, err := node.Claim(ctx, q, echostore.ClaimOptions{Consumer: "worker", Count: 2 - len(jobs)})
		if err != nil {
			log.Fatal(err)
		}
		jobs = append(jobs, res.Jobs...)
		if len(res.Jobs) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var entries []string
	for _, j := range jobs {
		payload, _ := mq.Record{Fields: j.Fields}.Get("payload")
		fmt.Println(payload)
		entries = append(entries, j.EntryID)
	}
	ack, err := node.Ack(ctx, q, entries)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acked", ack.Acked)
	// Output:
	// sync true accept.example-mail.0
	// async false
	// {"to":"ada"}
	// {"to":"grace"}
	// acked 2
}

// A follower pulls a volume that another node pushed to their shared
// remote, and reads it without Redis.
func ExampleNode_Pull() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	remote := "file://" + dir + "/shared-remote"

	leader, err := echostore.Open(ctx, echostore.Config{Data: dir + "/leader", Redis: redisURL, Remote: remote})
	if err != nil {
		log.Fatal(err)
	}
	defer leader.Close(ctx)
	ref, err := names.ParseStreamRef("example-follow", "log")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range []string{"one", "two", "three"} {
		if _, err := leader.Append(ctx, ref, [][]echostore.Field{record("line", line)}); err != nil {
			log.Fatal(err)
		}
	}
	// Fold all but the newest and trim only once the fold is pushed.
	opts := echostore.CycleOptions{Window: echostore.Window{Keep: 1}, TrimAfter: echostore.TrimAfterRemote}
	if _, err := leader.Cycle(ctx, ref, opts); err != nil {
		log.Fatal(err)
	}

	// The follower has no Redis: its volumes are all it needs.
	follower, err := echostore.Open(ctx, echostore.Config{Data: dir + "/follower", Remote: remote})
	if err != nil {
		log.Fatal(err)
	}
	defer follower.Close(ctx)
	pulled, err := follower.Pull(ctx, ref.Volume(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pulled.Volume, "remote LSN", pulled.RemoteLSN)
	for rec, err := range follower.Read(ctx, ref, echostore.ReadOptions{Side: echostore.ReadArchiveOnly}) {
		if err != nil {
			log.Fatal(err)
		}
		line, _ := rec.Get("line")
		fmt.Println(line)
	}
	// Output:
	// archive.example-follow.log remote LSN 1
	// one
	// two
}

// A program keeps its streams bounded and replicated with no serve: it
// declares how each stream is kept and runs the node. Each beat folds what
// the window drops into the archive, pushes it to the remote, and only then
// trims it from Redis (TrimAfterRemote).
func ExampleNode_Run() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	bucket, cleanupBucket := tempDir()
	defer cleanupBucket()
	node, err := echostore.Open(ctx, echostore.Config{Data: dir, Redis: redisURL, Remote: "file://" + bucket})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	ref, err := names.ParseStreamRef("example-run", "events")
	if err != nil {
		log.Fatal(err)
	}
	// Keep the two newest entries live; archive the rest.
	policy := echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 2}, TrimAfter: echostore.TrimAfterRemote}
	if err := node.Declare(ref, policy); err != nil {
		log.Fatal(err)
	}
	recs := make([][]echostore.Field, 5)
	for i := range recs {
		recs[i] = record("n", fmt.Sprint(i))
	}
	if _, err := node.Append(ctx, ref, recs); err != nil {
		log.Fatal(err)
	}

	trimmed := make(chan echostore.CycleReport, 1)
	runCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- node.Run(runCtx, echostore.RunOptions{Beat: 20 * time.Millisecond, BeatOptions: echostore.BeatOptions{
			OnCycle: func(r echostore.CycleReport) {
				if r.Err == nil && r.Result.Trimmed > 0 {
					select {
					case trimmed <- r:
					default:
					}
				}
			},
		}})
	}()
	select {
	case r := <-trimmed:
		fmt.Println("folded", r.Result.Folded, "trimmed", r.Result.Trimmed)
	case <-runCtx.Done():
		log.Fatal("no beat trimmed the stream within a minute")
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	st, err := node.Status(ctx, ref)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("archived", st.Archived, "live", st.Live)
	vol, err := names.ParseVolume(st.Volume)
	if err != nil {
		log.Fatal(err)
	}
	in, err := node.VolumeInfo(ctx, vol)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in the remote:", in.RemoteLSN > 0 && in.RemoteLSN == in.LocalLSN)
	// Output:
	// folded 3 trimmed 3
	// archived 3 live 2
	// in the remote: true
}
