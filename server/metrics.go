package server

import (
	"github.com/echostore/echostore/accept"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, on a private registry.
type metrics struct {
	reg *prometheus.Registry

	cycles     *prometheus.CounterVec
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
}

func newMetrics() *metrics {
	qs := []string{"queue", "stream"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_cycles_total",
			Help: "Cycles run per stream, by kind (archive: fold then trim; retention: trim only) and result (ok, error).",
		}, append(qs, "kind", "result")),
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
			Help: "Entries a cycle did not archive because they are larger than the archive holds (64 MiB of names, values and framing); the trim removes them with the entries around them.",
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
		checkpoint: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "echostore_accept_checkpoint_seconds",
			Help:    "Latency of serve's checkpoints of the accept outbox on each beat that finds records not yet durable (Flush: cut the partial block, write it, fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	m.reg.MustRegister(m.checkpoint, m.cycles, m.folded, m.trimmed, m.foldErrors, m.appTrims, m.tooLarge, m.live, m.depth, m.wLag,
		m.localLSN, m.remoteLSN, m.stalled, m.stalledN, m.http,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchOutbox adds the accept tier's gauges, read from the outbox at each
// scrape: the records not yet durable against the loss window K, and the
// intents accepted and not yet committed.
func (m *metrics) watchOutbox(out *accept.Outbox, k int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_undurable_records",
			Help: "Outbox log records acknowledged and not yet durable (at most echostore_accept_loss_window_records).",
		}, func() float64 { st := out.Stats(); return float64(st.Appended - st.Durable) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_loss_window_records",
			Help: "K: the most outbox records a crash can lose.",
		}, func() float64 { return float64(k) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "echostore_accept_pending_intents",
			Help: "Jobs accepted and not yet committed to their queue's accept volume.",
		}, func() float64 { return float64(out.Stats().Live) }),
	)
}
