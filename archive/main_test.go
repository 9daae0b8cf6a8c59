package archive

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var queueSeq atomic.Int64

var notName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// queueName returns a queue name unique to the test.
func queueName(t testing.TB) string {
	n := notName.ReplaceAllString(t.Name(), "_")
	if len(n) > 60 {
		n = n[:60]
	}
	return fmt.Sprintf("%s-%d-%d", n, os.Getpid(), queueSeq.Add(1))
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func connect(t testing.TB, url string) *mq.Client {
	t.Helper()
	c, err := mq.Connect(testCtx(t), mq.Options{URL: url, Logger: quietLog()})
	if err != nil {
		t.Fatalf("Connect(%s): %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

func openStore(t testing.TB, dir string) *graft.Store {
	t.Helper()
	st, err := graft.Open(testCtx(t), dir, graft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// tb is what the helpers need of a test (testing.TB or *rapid.T).
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// env is one stream with an archiver over a fresh store.
type env struct {
	t    tb
	live *mq.Client
	st   *graft.Store
	a    *Archiver
	q, s string
}

func newEnv(t testing.TB, url string, opts Options) *env {
	e := &env{t: t, live: connect(t, url), st: openStore(t, t.TempDir()), q: queueName(t), s: "events"}
	opts.Store, opts.Live = e.st, e.live
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.a = a
	return e
}

func (e *env) append(ctx context.Context, n int) []brand.ID {
	e.t.Helper()
	batch := make([][]mq.Field, n)
	for i := range batch {
		batch[i] = []mq.Field{{Name: "n", Value: fmt.Sprint(i)}, {Name: "k", Value: "v"}}
	}
	ids, err := e.live.AppendBatch(ctx, e.ref(), batch)
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func (e *env) volume(ctx context.Context) *graft.Volume {
	v, err := e.st.Volume(ctx, e.ref().Volume())
	if err != nil {
		return nil
	}
	return v
}

func (e *env) source(ctx context.Context) Source {
	return Source{Ref: e.ref(), Live: e.live, Volume: e.volume(ctx)}
}

// ids collects the ids of a read, failing the test on an error or on a
// record without a branded id (the tests' records have one).
func ids(t tb, seq func(func(mq.Record, error) bool)) []brand.ID {
	t.Helper()
	var out []brand.ID
	for r, err := range seq {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, brandOf(t, r.ID))
	}
	return out
}

// bx is the Redis id of a branded id as a range bound: 0 and brand.Max are
// the open ends xid.Min and xid.Max.
func bx(id brand.ID) xid.ID {
	switch id {
	case 0:
		return xid.Min
	case brand.Max:
		return xid.Max
	}
	return id.XID()
}

// xb is bx's inverse: xid.Min and xid.Max are 0 and brand.Max, any other
// id its branded id (0 if it has none).
func xb(id xid.ID) brand.ID {
	switch id {
	case xid.Min:
		return 0
	case xid.Max:
		return brand.Max
	}
	b, _ := brand.FromXID(id)
	return b
}

// brandOf is the branded id of a record id the tests appended.
func brandOf(t tb, id xid.ID) brand.ID {
	t.Helper()
	b, err := brand.FromXID(id)
	if err != nil {
		t.Fatalf("record id %v: %v", id, err)
	}
	return b
}

// liveIDs returns the ids in the live stream.
func (e *env) liveIDs(ctx context.Context) []brand.ID {
	return ids(e.t, e.live.Read(ctx, e.ref(), xid.Min, xid.Max, 0, false))
}

// archiveIDs returns the ids in the archive.
func (e *env) archiveIDs(ctx context.Context) []brand.ID {
	v := e.volume(ctx)
	if v == nil {
		return nil
	}
	return ids(e.t, Read(ctx, v, xid.Min, xid.Max, false))
}

// audit checks that every id of want is in exactly one of archive and live
// (ids the stream keeps at or below W count as archived) and that the
// merge-read returns want, in order, forward and reverse.
func (e *env) audit(ctx context.Context, want []brand.ID) {
	e.t.Helper()
	arch := e.archiveIDs(ctx)
	var st State
	if v := e.volume(ctx); v != nil {
		var err error
		if st, err = Frontier(ctx, v); err != nil {
			e.t.Fatal(err)
		}
	}
	var liveAbove []brand.ID
	for _, id := range e.liveIDs(ctx) {
		if !st.Covers(id.XID()) {
			liveAbove = append(liveAbove, id)
		}
	}
	if got := append(slices.Clone(arch), liveAbove...); !slices.Equal(got, want) {
		e.t.Fatalf("archive (%d) ++ live above W (%d) = %d ids, want %d; first difference at %d",
			len(arch), len(liveAbove), len(got), len(want), firstDiff(got, want))
	}
	got := ids(e.t, MergeRead(ctx, e.source(ctx), All()))
	if !slices.Equal(got, want) {
		e.t.Fatalf("merge-read: %d ids, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	rev := ids(e.t, MergeRead(ctx, e.source(ctx), Range{To: xid.Max, Reverse: true}))
	slices.Reverse(rev)
	if !slices.Equal(rev, want) {
		e.t.Fatalf("reverse merge-read: %d ids, want %d; first difference at %d", len(rev), len(want), firstDiff(rev, want))
	}
}

// appender records the ids a background goroutine appends, in id order.
type appender struct {
	mu  sync.Mutex
	ids []brand.ID
}

// snapshot returns the ids appended (and recorded) so far.
func (a *appender) snapshot() []brand.ID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ids)
}

// startAppender appends batches of 1 to batch records to e's stream, one
// batch at a time, until n are appended or stop is closed.
func (e *env) startAppender(ctx context.Context, n, batch int, stop <-chan struct{}, wg *sync.WaitGroup) *appender {
	a := &appender{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; len(a.snapshot()) < n; i++ {
			select {
			case <-stop:
				return
			default:
			}
			got := e.append(ctx, 1+i%batch)
			a.mu.Lock()
			a.ids = append(a.ids, got...)
			a.mu.Unlock()
		}
	}()
	return a
}

func firstDiff(a, b []brand.ID) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// mustRef returns the StreamRef of stream s of queue q, failing the test if
// the names are not valid.
func mustRef(t tb, q, s string) names.StreamRef {
	t.Helper()
	ref, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatalf("stream %s/%s: %v", q, s, err)
	}
	return ref
}

// mustQueue returns queue name q checked, failing the test if it is not
// valid.
func mustQueue(t tb, q string) names.Queue {
	t.Helper()
	qq, err := names.ParseQueue(q)
	if err != nil {
		t.Fatalf("queue %s: %v", q, err)
	}
	return qq
}

// ref returns the StreamRef of e's stream.
func (e *env) ref() names.StreamRef { return mustRef(e.t, e.q, e.s) }

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// volName returns volume name s checked; it panics if s is not a valid
// volume name (test names are made valid).
func volName(s string) names.Volume {
	v, err := names.ParseVolume(s)
	if err != nil {
		panic(err)
	}
	return v
}
