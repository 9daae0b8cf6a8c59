package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/echostore/echostore/names"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/accept"
	"github.com/echostore/echostore/graft/remote"
)

// metrics are the server's Prometheus metrics, on a private registry.
type metrics struct {
	reg *prometheus.Registry

	cycles     *prometheus.CounterVec
	appended   *prometheus.CounterVec
	folded     *prometheus.CounterVec
	trimmed    *prometheus.CounterVec
	foldErrors *prometheus.CounterVec
	appTrims   *prometheus.CounterVec
	tooLarge   *prometheus.CounterVec
	live       *prometheus.GaugeVec
	depth      *prometheus.GaugeVec
	wLag       *prometheus.GaugeVec
	localLSN   *prometheus.GaugeVec
	remoteLSN  *prometheus.GaugeVec
	stalled    *prometheus.GaugeVec
	stalledN   *prometheus.CounterVec
	http       *prometheus.HistogramVec
	checkpoint prometheus.Histogram
	// beatStreams: the archived streams of the last beat, by what it did
	// with them (echostore's idle.go).
	beatStreams *prometheus.GaugeVec
	// beats counts the beats run.
	beats prometheus.Counter
	jobs  *jobMetrics
	tally *tally // what the console's live charts show (series.go)
}

func newMetrics() *metrics {
	qs := []string{"queue", "stream"}
	t := newTally()
	m := &metrics{
		reg:   prometheus.NewRegistry(),
		jobs:  newJobMetrics(t),
		tally: t,
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_cycles_total",
			Help: "Cycles run per stream, by kind (archive: fold then trim; retention: trim only) and result (ok, error).",
		}, append(qs, "kind", "result")),
		appended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_appended_records_total",
			Help: "Records appended to the stream through serve (HTTP and its unix socket; producers writing to Redis directly are not counted).",
		}, qs),
		folded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_folded_records_total",
			Help: "Records folded into the stream's archive volume.",
		}, qs),
		trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_trimmed_entries_total",
			Help: "Live entries trimmed from the stream, by kind (archive, retention).",
		}, append(qs, "kind")),
		foldErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_fold_errors_total",
			Help: "Archive cycles that failed (nothing unfolded is trimmed by a failed cycle).",
		}, qs),
		appTrims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_app_trim_detected_total",
			Help: "Cycles that found entries above the watermark removed by another client (the application's MAXLEN, XTRIM or XDEL) before they were folded: history missing from the archive.",
		}, qs),
		tooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_archive_too_large_total",
			Help: "Cycles that met an entry larger than the archive holds (archive.MaxRecordBytes, 1 GiB of names, values and framing: only a Redis configured beyond its defaults holds one); the trim holds below it, so nothing unarchived is trimmed.",
		}, qs),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_stream_live_length",
			Help: "Entries in the live stream in Redis, read after the stream's last cycle.",
		}, qs),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_archive_depth_records",
			Help: "Records in the stream's archive (ids at or below the watermark W).",
		}, qs),
		wLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_archive_watermark_lag_seconds",
			Help: "Time between the watermark W and the newest live record of the stream.",
		}, qs),
		localLSN: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_volume_local_lsn",
			Help: "The volume's newest local commit.",
		}, []string{"volume"}),
		remoteLSN: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_volume_remote_lsn",
			Help: "The volume's newest remote commit pushed or applied (0 before the first).",
		}, []string{"volume"}),
		stalled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_stream_stalled_groups",
			Help: "Consumer groups that held back the stream's trim past max_live or max_hold at its last archive cycle (docs/ARCHIVE.md, Consumer groups).",
		}, qs),
		stalledN: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_stream_stalled_group_cycles_total",
			Help: "Archive cycles that found a stalled consumer group, counted once per group, by what the cycle did (policy hold: kept its entries; archive: trimmed past them).",
		}, append(qs, "policy")),
		http: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "echostore_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern, method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method", "code"}),
		beatStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "echostore_beat_streams",
			Help: "Archived streams of this node's last beat, by what it did (due: cycled; swept: due because the sweep found its top moved; probed: idle streams whose top the sweep read; idle: left alone).",
		}, []string{"state"}),
		beats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "echostore_beats_total",
			Help: "Beats run (each one: discovery, the due archived streams cycled, retention); a rate below 1/beat means beats run late.",
		}),
		checkpoint: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "echostore_accept_checkpoint_seconds",
			Help:    "Latency of serve's checkpoints of the accept outbox on each beat that finds records not yet durable (Flush: cut the partial block, write it, fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m.reg.MustRegister(m.beatStreams, m.beats, m.checkpoint, m.cycles, m.appended, m.folded, m.trimmed, m.foldErrors, m.appTrims, m.tooLarge, m.live, m.depth, m.wLag,
		m.localLSN, m.remoteLSN, m.stalled, m.stalledN, m.http,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.jobs.collectors()...)
	return m
}

// declared makes the per-stream counters of ref exist at zero, so that
// rate() and increase() (and alerts on them) see its first cycle and its
// first fold error.
func (m *metrics) declared(ref names.StreamRef, archived bool) {
	q, st := refLabels(ref)
	m.appended.WithLabelValues(q, st)
	if !archived {
		m.cycles.WithLabelValues(q, st, "retention", "ok")
		m.cycles.WithLabelValues(q, st, "retention", "error")
		m.trimmed.WithLabelValues(q, st, "retention")
		return
	}
	for _, r := range []string{"ok", "error"} {
		m.cycles.WithLabelValues(q, st, "archive", r)
	}
	m.folded.WithLabelValues(q, st)
	m.trimmed.WithLabelValues(q, st, "archive")
	m.foldErrors.WithLabelValues(q, st)
	m.appTrims.WithLabelValues(q, st)
	m.tooLarge.WithLabelValues(q, st)
	m.stalled.WithLabelValues(q, st)
}

// watchOutbox adds the accept tier's gauges, read from the outbox at each
// scrape: the records not yet durable against the loss window K, and the
// intents accepted and not yet committed.
func (m *metrics) watchOutbox(stats func() (accept.Stats, bool), k int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_undurable_records",
			Help: "Outbox log records acknowledged and not yet durable (at most echostore_accept_loss_window_records).",
		}, func() float64 { st, _ := stats(); return float64(st.Appended - st.Durable) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_loss_window_records",
			Help: "K: the most outbox records a crash can lose.",
		}, func() float64 { return float64(k) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_pending_intents",
			Help: "Jobs accepted and not yet committed to their queue's accept volume.",
		}, func() float64 { st, _ := stats(); return float64(st.Live) }),
	)
}

// nodeCollector reads, at each scrape, what the node counts itself: the
// remote store's requests and bytes (its metering wrapper), the background
// replication's pushes, and each volume's replication lag (the data dir
// alone: no remote request).
type nodeCollector struct {
	node *echostore.Node
	log  *slog.Logger

	requests, bytes, pushes, outage, lagCommits, lagRecords, lagSeconds *prometheus.Desc
}

// watchNode adds the node's own counts (nodeCollector).
func (m *metrics) watchNode(node *echostore.Node, log *slog.Logger) {
	m.reg.MustRegister(&nodeCollector{node: node, log: log,
		requests: prometheus.NewDesc("echostore_remote_requests_total",
			"Requests sent to the object store, by operation (put_if_absent, put, get, get_range, list, delete) and result (ok, not_found, exists, error).",
			[]string{"op", "result"}, nil),
		bytes: prometheus.NewDesc("echostore_remote_bytes_total",
			"Object bodies sent to (out) and received from (in) the object store, in bytes, as they cross the wire.",
			[]string{"direction"}, nil),
		pushes: prometheus.NewDesc("echostore_replication_pushes_total",
			"Background pushes (replicate_every), by result: ok (commits published) or error (each failed attempt).",
			[]string{"result"}, nil),
		outage: prometheus.NewDesc("echostore_replication_outage",
			"1 while the background replication backs off from a remote that failed its last push, else 0.",
			nil, nil),
		lagCommits: prometheus.NewDesc("echostore_volume_replication_lag_commits",
			"Local commits of the volume not yet pushed to the remote (local LSN - sync LSN).",
			[]string{"volume"}, nil),
		lagRecords: prometheus.NewDesc("echostore_volume_replication_lag_records",
			"Records on the volume's commits not yet pushed (archive volumes: archived records; accept volumes: jobs).",
			[]string{"volume"}, nil),
		lagSeconds: prometheus.NewDesc("echostore_volume_replication_lag_seconds",
			"Age of the volume's oldest commit not yet pushed (0: none).",
			[]string{"volume"}, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.bytes, c.pushes, c.outage, c.lagCommits, c.lagRecords, c.lagSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.node.RemoteMeter()
	for _, r := range m.Requests {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(r.N), r.Op, r.Result)
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(m.BytesIn), remote.DirectionIn)
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(m.BytesOut), remote.DirectionOut)
	st := c.node.ReplicationStats()
	ch <- prometheus.MustNewConstMetric(c.pushes, prometheus.CounterValue, float64(st.Pushes), "ok")
	ch <- prometheus.MustNewConstMetric(c.pushes, prometheus.CounterValue, float64(st.Failed), "error")
	out := 0.0
	if st.Outage {
		out = 1
	}
	ch <- prometheus.MustNewConstMetric(c.outage, prometheus.GaugeValue, out)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	vols, err := c.node.Volumes(ctx)
	if err != nil {
		c.log.Warn("serve: metrics: replication lag of the volumes", "err", err)
		return
	}
	for _, v := range vols.Volumes {
		name := v.Volume.String()
		ch <- prometheus.MustNewConstMetric(c.lagCommits, prometheus.GaugeValue, float64(v.Lag.Commits), name)
		if v.Lag.Records != nil {
			ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(*v.Lag.Records), name)
		}
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, v.Lag.Seconds, name)
	}
}

// watchGC adds the remote GC's counters, read from the node at each scrape:
// objects and bytes removed by kind (segment, commit, marker) and the
// passes run and the volumes whose pass failed.
func (m *metrics) watchGC(node *echostore.Node) {
	m.reg.MustRegister(gcCollector{node: node})
}

var (
	gcObjectsDesc = prometheus.NewDesc("echostore_remote_gc_objects_total",
		"Remote objects removed by GC, by kind (segment: deleted; commit: replaced by a tombstone; marker: checkpoint marker deleted).",
		[]string{"kind"}, nil)
	gcBytesDesc = prometheus.NewDesc("echostore_remote_gc_bytes_total",
		"Bytes of object storage given back by remote GC, by kind (commit: the commit's size less its tombstone's).",
		[]string{"kind"}, nil)
	gcPassesDesc = prometheus.NewDesc("echostore_remote_gc_passes_total",
		"Passes of the background remote GC over the data dir's volumes.", nil, nil)
	gcErrorsDesc = prometheus.NewDesc("echostore_remote_gc_errors_total",
		"Volumes whose remote GC pass failed (tried again on the next pass).", nil, nil)
)

// gcCollector reports the node's GC totals.
type gcCollector struct{ node *echostore.Node }

// Describe implements prometheus.Collector.
func (gcCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- gcObjectsDesc
	ch <- gcBytesDesc
	ch <- gcPassesDesc
	ch <- gcErrorsDesc
}

// Collect implements prometheus.Collector.
func (c gcCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.node.GCTotals()
	for k, kind := range echostore.GCKinds {
		ch <- prometheus.MustNewConstMetric(gcObjectsDesc, prometheus.CounterValue, float64(t.Objects[k]), kind)
		ch <- prometheus.MustNewConstMetric(gcBytesDesc, prometheus.CounterValue, float64(t.Bytes[k]), kind)
	}
	ch <- prometheus.MustNewConstMetric(gcPassesDesc, prometheus.CounterValue, float64(t.Passes))
	ch <- prometheus.MustNewConstMetric(gcErrorsDesc, prometheus.CounterValue, float64(t.Errors))
}
