package echostore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/mem"
)

// flakyDriver opens flaky:// as a mem:// store whose every request fails
// with remote.ErrUnavailable while down is set.
type flakyDriver struct{ down *atomic.Bool }

func (flakyDriver) Schemes() []string { return []string{"flaky"} }

func (d flakyDriver) Open(ctx context.Context, _ *url.URL) (remote.Store, error) {
	u, _ := url.Parse("mem://")
	s, err := mem.Driver{}.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	return &flakyStore{Store: s, down: d.down}, nil
}

type flakyStore struct {
	remote.Store
	down *atomic.Bool
}

func (f *flakyStore) fail() error {
	if f.down.Load() {
		return fmt.Errorf("flaky: %w", remote.ErrUnavailable)
	}
	return nil
}

func (f *flakyStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.PutIfAbsent(ctx, key, data)
}

func (f *flakyStore) Put(ctx context.Context, key string, data []byte) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.Put(ctx, key, data)
}

func (f *flakyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, key)
}

func (f *flakyStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.GetRange(ctx, key, off, n)
}

func (f *flakyStore) List(ctx context.Context, prefix string, limit int) ([]remote.ObjectInfo, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, prefix, limit)
}

// logCount is a slog handler that counts the records whose message
// contains one of its keys.
type logCount struct {
	mu   sync.Mutex
	keys []string
	n    map[string]int
}

func newLogCount(keys ...string) *logCount { return &logCount{keys: keys, n: map[string]int{}} }

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.keys {
		if strings.Contains(r.Message, k) {
			l.n[k]++
		}
	}
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }
func (l *logCount) count(k string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[k]
}

// waitFor polls cond every few milliseconds until it holds, failing the
// test with what once the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func commitPages(t *testing.T, ctx context.Context, vol *graft.Volume, n int) {
	t.Helper()
	for i := range n {
		txn := vol.Begin()
		if err := txn.Put(uint64(i), []byte(fmt.Sprintf("page %d at %d", i, vol.Head()))); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx, graft.Synced); err != nil {
			t.Fatal(err)
		}
	}
}

func synced(vol *graft.Volume) bool { in := vol.Info(); return in.LocalLSN == in.SyncLSN }

// TestReplicateBackground: with ReplicateEvery, a volume's commits reach
// the remote with no push call, its lag goes back to zero, and once it is
// pushed nothing waits (no timer, no request).
func TestReplicateBackground(t *testing.T) {
	ctx := testCtx(t)
	var down atomic.Bool
	n := open(t, echostore.Config{Data: t.TempDir(), Remote: "flaky://", ReplicateEvery: 20 * time.Millisecond,
		Drivers: []remote.Driver{flakyDriver{&down}}})
	vol, err := n.Store().CreateVolume(ctx, mustVolume(t, "vol.bg"))
	if err != nil {
		t.Fatal(err)
	}
	commitPages(t, ctx, vol, 3)
	lag, err := n.ReplicationLag(ctx, vol.Name())
	if err != nil {
		t.Fatal(err)
	}
	if lag.Commits == 0 && !synced(vol) {
		t.Errorf("lag %+v of a volume with unpushed commits", lag)
	}
	waitFor(t, 10*time.Second, "the volume pushed in the background", func() bool { return synced(vol) })
	if lag, err = n.ReplicationLag(ctx, vol.Name()); err != nil || lag.Commits != 0 || lag.Seconds != 0 {
		t.Errorf("lag after the push: %+v, %v; want none", lag, err)
	}
	st := n.ReplicationStats()
	if st.Pushes < 1 || st.Pushes > 3 || st.Failed != 0 {
		t.Errorf("stats %+v: want 1 to 3 pushes for 3 commits, no failure", st)
	}
	waitFor(t, 10*time.Second, "nothing waiting once pushed", func() bool { return n.ReplicationStats().Waiting == 0 })
	l, err := remote.NewLog(n.Remote(), vol.Name())
	if err != nil {
		t.Fatal(err)
	}
	if head, err := l.Head(ctx); err != nil || head != vol.Info().RemoteLSN {
		t.Errorf("remote head %d, %v; the volume's remote LSN %d", head, err, vol.Info().RemoteLSN)
	}
}

// TestReplicateOutage: while the remote fails, commits land at once, the
// outage is logged once however many probes fail, and once the remote is
// back every volume catches up by itself.
func TestReplicateOutage(t *testing.T) {
	ctx := testCtx(t)
	var down atomic.Bool
	logs := newLogCount("the remote failed a push", "the remote is back")
	n := open(t, echostore.Config{Data: t.TempDir(), Remote: "flaky://", ReplicateEvery: 10 * time.Millisecond,
		Drivers: []remote.Driver{flakyDriver{&down}}, Logger: slog.New(logs)})
	var vols []*graft.Volume
	for _, name := range []string{"vol.o1", "vol.o2", "vol.o3"} {
		vol, err := n.Store().CreateVolume(ctx, mustVolume(t, name))
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, vol)
	}
	commitPages(t, ctx, vols[0], 1)
	waitFor(t, 10*time.Second, "the first push", func() bool { return synced(vols[0]) })
	down.Store(true)
	for _, vol := range vols {
		commitPages(t, ctx, vol, 2) // commits do not wait for the remote
	}
	waitFor(t, 20*time.Second, "an outage with 4 failed probes", func() bool {
		st := n.ReplicationStats()
		return st.Outage && st.Failed >= 4
	})
	if got := logs.count("the remote failed a push"); got != 1 {
		t.Errorf("the outage was logged %d times, want once", got)
	}
	for _, vol := range vols {
		if synced(vol) {
			t.Fatalf("volume %s pushed with the remote down", vol.Name())
		}
	}
	down.Store(false)
	waitFor(t, 30*time.Second, "every volume pushed after the outage", func() bool {
		return synced(vols[0]) && synced(vols[1]) && synced(vols[2])
	})
	if st := n.ReplicationStats(); st.Outage {
		t.Errorf("stats %+v after the remote came back: still an outage", st)
	}
	if got := logs.count("the remote is back"); got != 1 {
		t.Errorf("the end of the outage was logged %d times, want once", got)
	}
}

// TestReplicateBesideExplicitPush: explicit pushes (a cycle's, the accept
// tier's, `volume push`) and the background replication share the
// volume's push lock: neither fails, and the remote log ends at the
// volume's remote LSN with every commit covered.
func TestReplicateBesideExplicitPush(t *testing.T) {
	ctx := testCtx(t)
	var down atomic.Bool
	n := open(t, echostore.Config{Data: t.TempDir(), Remote: "flaky://", ReplicateEvery: time.Millisecond,
		Drivers: []remote.Driver{flakyDriver{&down}}})
	vol, err := n.Store().CreateVolume(ctx, mustVolume(t, "vol.both"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		commitPages(t, ctx, vol, 1)
		if i%3 == 0 {
			if _, err := n.Push(ctx, vol.Name()); err != nil {
				t.Fatalf("explicit push %d beside the background one: %v", i, err)
			}
		}
	}
	waitFor(t, 10*time.Second, "the last commits pushed", func() bool { return synced(vol) })
	l, err := remote.NewLog(n.Remote(), vol.Name())
	if err != nil {
		t.Fatal(err)
	}
	if head, err := l.Head(ctx); err != nil || head != vol.Info().RemoteLSN {
		t.Errorf("remote head %d, %v; the volume's remote LSN %d", head, err, vol.Info().RemoteLSN)
	}
	if st := n.ReplicationStats(); st.Failed != 0 {
		t.Errorf("stats %+v: a background push failed", st)
	}
}
