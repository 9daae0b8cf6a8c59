package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSampleEvery is how often serve samples the console's live charts.
const DefaultSampleEvery = 5 * time.Second

// seriesSpan is how far back the live charts reach.
const seriesSpan = 15 * time.Minute

// Sample is one point of the console's live charts: rates over the
// interval since the previous sample, and levels at its time. It is the
// data of a "sample" event and an element of GET /v1/series.
type Sample struct {
	// T is the sample's time, in Unix milliseconds.
	T int64 `json:"t"`
	// Appends, Folded and Trimmed are records per second appended through
	// serve, folded into archives and trimmed from Redis (archive and
	// retention trims).
	Appends float64 `json:"appends"`
	Folded  float64 `json:"folded"`
	Trimmed float64 `json:"trimmed"`
	// Enqueued, Claimed and Acked are jobs per second.
	Enqueued float64 `json:"enqueued"`
	Claimed  float64 `json:"claimed"`
	Acked    float64 `json:"acked"`
	// SyncP50 and SyncP99 are the latency quantiles, in milliseconds, of
	// the sync enqueues acknowledged in the interval (0: none).
	SyncP50 float64 `json:"sync_p50_ms"`
	SyncP99 float64 `json:"sync_p99_ms"`
	// RedisUsed is Redis's used_memory (summed over a Cluster's masters;
	// -1 when it could not be read).
	RedisUsed int64 `json:"redis_used_memory"`
	// LiveEquivalent estimates what the same history would take in Redis
	// if none of it were archived: RedisUsed scaled by (archived + live)
	// ÷ live records of the streams serve cycles (-1 without live records).
	LiveEquivalent int64 `json:"live_equivalent_memory"`
	// ReplicationLag is the commits of the data dir's volumes not yet on
	// the remote (local LSN − remote LSN, summed).
	ReplicationLag uint64 `json:"replication_lag_commits"`
	// RemoteRequests is requests per second to the object store, and
	// RemoteBytes body bytes per second each way (both 0 for a node
	// without a remote), as the node's metering counts them.
	RemoteRequests float64 `json:"remote_requests"`
	RemoteBytes    float64 `json:"remote_bytes"`
}

// tally counts what the live charts show, beside the Prometheus metrics
// (which a sampler could read only through a whole Gather).
type tally struct {
	appended, folded, trimmed atomic.Int64
	enqueued, claimed, acked  atomic.Int64

	mu      sync.Mutex
	syncLat []time.Duration     // the interval's sync enqueue latencies
	streams map[string][2]int64 // per stream: live, archived records at its last cycle
}

func newTally() *tally { return &tally{streams: map[string][2]int64{}} }

// syncEnqueued records one sync enqueue's latency.
func (t *tally) syncEnqueued(d time.Duration) {
	t.mu.Lock()
	if len(t.syncLat) < 1<<16 { // bounded between two samples
		t.syncLat = append(t.syncLat, d)
	}
	t.mu.Unlock()
}

// cycled records what a cycle event says of a stream.
func (t *tally) cycled(key string, ev CycleEvent) {
	t.folded.Add(ev.Folded)
	t.trimmed.Add(ev.Trimmed)
	if ev.Live < 0 {
		return
	}
	t.mu.Lock()
	t.streams[key] = [2]int64{ev.Live, int64(ev.Archive)}
	t.mu.Unlock()
}

// forget drops a deleted stream's counts.
func (t *tally) forget(key string) {
	t.mu.Lock()
	delete(t.streams, key)
	t.mu.Unlock()
}

// series keeps the last seriesSpan of samples.
type series struct {
	mu     sync.Mutex
	points []Sample
	prev   [8]int64 // the tally's counters, then the remote's requests and bytes
	prevT  time.Time
}

// quantile returns the q-quantile of sorted ds in milliseconds.
func quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	i := min(len(ds)-1, int(q*float64(len(ds))))
	return float64(ds[i].Microseconds()) / 1000
}

// sample takes one sample at now, keeps it, and returns it.
func (s *Server) sample(ctx context.Context, now time.Time) Sample {
	t := s.m.tally
	rm := s.node.RemoteMeter()
	cur := [8]int64{t.appended.Load(), t.folded.Load(), t.trimmed.Load(), t.enqueued.Load(), t.claimed.Load(), t.acked.Load(),
		rm.Total(), rm.BytesIn + rm.BytesOut}
	t.mu.Lock()
	lat := t.syncLat
	t.syncLat = nil
	var live, archived int64
	for _, v := range t.streams {
		live += v[0]
		archived += v[1]
	}
	t.mu.Unlock()
	slices.Sort(lat)
	p := Sample{T: now.UnixMilli(), SyncP50: quantile(lat, 0.5), SyncP99: quantile(lat, 0.99), RedisUsed: -1, LiveEquivalent: -1}
	if used, err := s.node.UsedMemory(ctx); err == nil {
		p.RedisUsed = used
		if live > 0 {
			p.LiveEquivalent = int64(float64(used) * float64(live+archived) / float64(live))
		}
	}
	if vols, err := s.node.Volumes(ctx); err == nil {
		for _, v := range vols.Volumes {
			if v.LocalLSN > v.RemoteLSN {
				p.ReplicationLag += v.LocalLSN - v.RemoteLSN
			}
		}
	}
	sr := &s.series
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if !sr.prevT.IsZero() {
		if dt := now.Sub(sr.prevT).Seconds(); dt > 0 {
			rate := func(i int) float64 { return float64(cur[i]-sr.prev[i]) / dt }
			p.Appends, p.Folded, p.Trimmed = rate(0), rate(1), rate(2)
			p.Enqueued, p.Claimed, p.Acked = rate(3), rate(4), rate(5)
			p.RemoteRequests, p.RemoteBytes = rate(6), rate(7)
		}
	}
	sr.prev, sr.prevT = cur, now
	sr.points = append(sr.points, p)
	cut := 0
	for cut < len(sr.points) && now.Sub(time.UnixMilli(sr.points[cut].T)) > seriesSpan {
		cut++
	}
	sr.points = slices.Delete(sr.points, 0, cut)
	return p
}

// sampleLoop samples every cfg.SampleEvery until ctx ends, publishing each
// sample ("sample" event) and the queues' state ("queues" event, the
// newest of which a new subscriber gets first).
func (s *Server) sampleLoop(ctx context.Context) {
	every(ctx, s.cfg.SampleEvery, func() {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.SampleEvery)
		defer cancel()
		s.hub.publish("", "sample", s.sample(sctx, time.Now()))
		if list, err := s.queueList(sctx); err == nil {
			s.hub.publishChanged("queues", "queues", list)
		}
	})
}

// Series is the answer of GET /v1/series: the samples of the last 15
// minutes, oldest first, and the sampling interval.
type Series struct {
	EveryMs int64    `json:"every_ms"`
	Samples []Sample `json:"samples"`
}

func (s *Server) handleSeries(w http.ResponseWriter, r *http.Request) error {
	s.series.mu.Lock()
	out := Series{EveryMs: s.cfg.SampleEvery.Milliseconds(), Samples: slices.Clone(s.series.points)}
	s.series.mu.Unlock()
	if out.Samples == nil {
		out.Samples = []Sample{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
