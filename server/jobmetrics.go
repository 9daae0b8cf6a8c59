package server

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// maxQueueGauges bounds the queues whose state gauges a scrape reads from
// Redis (one round trip each, in name order): the job counters cover every
// queue.
const maxQueueGauges = 256

// queueStatusTimeout bounds the Redis reads of one scrape's queue gauges.
const queueStatusTimeout = 2 * time.Second

// jobMetrics are the counters and latencies of the job operations serve
// handles (HTTP and its unix socket), and the per-queue state gauges read
// at each scrape. A queue's series exist, at zero, from the first
// operation on it, so that rate() and increase() see its first job.
type jobMetrics struct {
	enqueued *prometheus.CounterVec
	enqueue  *prometheus.HistogramVec
	claimed  *prometheus.CounterVec
	retried  *prometheus.CounterVec
	acked    *prometheus.CounterVec
	dead     *prometheus.CounterVec
	redriven *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	tally *tally

	mu     sync.Mutex
	queues map[names.Queue]bool
	// syncLat are each queue's latest sync enqueue latencies (a ring of
	// syncRing), for the console's per-queue quantiles.
	syncLat map[names.Queue]*latRing
	// retriedN counts each queue's deliveries after the first since serve
	// started (the console's retried column; the counter's value).
	retriedN map[names.Queue]int64
}

// retriedJobs returns q's deliveries after the first since serve started.
func (m *jobMetrics) retriedJobs(q names.Queue) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.retriedN[q]
}

// syncRing is how many of a queue's latest sync enqueues its quantiles
// cover.
const syncRing = 256

// latRing is a queue's latest sync enqueue latencies.
type latRing struct {
	d [syncRing]time.Duration
	n uint64
}

// syncQuantiles returns the p50 and p99, in milliseconds, of q's latest
// sync enqueues, and how many they are (at most syncRing).
func (m *jobMetrics) syncQuantiles(q names.Queue) (p50, p99 float64, n int) {
	m.mu.Lock()
	r := m.syncLat[q]
	var ds []time.Duration
	if r != nil {
		ds = append(ds, r.d[:min(r.n, syncRing)]...)
	}
	m.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return quantile(ds, 0.50), quantile(ds, 0.99), len(ds)
}

func newJobMetrics(t *tally) *jobMetrics {
	q := []string{"queue"}
	return &jobMetrics{
		tally:    t,
		queues:   map[names.Queue]bool{},
		syncLat:  map[names.Queue]*latRing{},
		retriedN: map[names.Queue]int64{},
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_enqueued_total",
			Help: "Jobs acknowledged to an enqueue, by durability mode (async: in the outbox; sync: replicated).",
		}, append(q, "mode")),
		enqueue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "echostore_job_enqueue_seconds",
			Help:    "Latency of acknowledged enqueues, by durability mode (sync includes the remote push).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"mode"}),
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_claimed_total",
			Help: "Job deliveries handed to consumers (every attempt counts).",
		}, q),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_retried_total",
			Help: "Job deliveries after the first (attempt 2 and later): jobs a consumer claimed and did not acknowledge in time.",
		}, q),
		acked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_acked_total",
			Help: "Job deliveries acknowledged (pending entries removed).",
		}, q),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_dead_total",
			Help: "Jobs moved to the dead letters by a claim's recovery of stalled jobs that had used up their attempts.",
		}, q),
		redriven: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "echostore_jobs_redriven_total",
			Help: "Dead letters put back on their job stream.",
		}, q),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "echostore_job_latency_seconds",
			Help: "Time from a job's dispatch to its job stream (its entry id) to its acknowledgement: waiting plus processing. " +
				"Observed for acks whose every entry was pending.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
		}, q),
	}
}

// collectors returns the metrics to register.
func (m *jobMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.enqueued, m.enqueue, m.claimed, m.retried, m.acked, m.dead, m.redriven, m.latency}
}

// seen makes q's series exist (at zero) and adds q to the queues whose
// state gauges a scrape reads.
func (m *jobMetrics) seen(q names.Queue) {
	m.mu.Lock()
	known := m.queues[q]
	m.queues[q] = true
	m.mu.Unlock()
	if known {
		return
	}
	l := q.String()
	for _, mode := range []string{"async", "sync"} {
		m.enqueued.WithLabelValues(l, mode)
	}
	m.claimed.WithLabelValues(l)
	m.retried.WithLabelValues(l)
	m.acked.WithLabelValues(l)
	m.dead.WithLabelValues(l)
	m.redriven.WithLabelValues(l)
}

// enqueuedOne records an acknowledged enqueue that took d.
func (m *jobMetrics) enqueuedOne(q names.Queue, mode string, d time.Duration) {
	m.seen(q)
	m.enqueued.WithLabelValues(q.String(), mode).Inc()
	m.enqueue.WithLabelValues(mode).Observe(d.Seconds())
	m.tally.enqueued.Add(1)
	if mode == "sync" {
		m.tally.syncEnqueued(d)
		m.mu.Lock()
		r := m.syncLat[q]
		if r == nil {
			r = &latRing{}
			m.syncLat[q] = r
		}
		r.d[r.n%syncRing] = d
		r.n++
		m.mu.Unlock()
	}
}

// claimedJobs records a claim's deliveries and the jobs its recovery
// moved to the dead letters.
func (m *jobMetrics) claimedJobs(q names.Queue, res echostore.ClaimResult) {
	m.seen(q)
	l := q.String()
	m.claimed.WithLabelValues(l).Add(float64(len(res.Jobs)))
	m.tally.claimed.Add(int64(len(res.Jobs)))
	retried := 0
	for _, j := range res.Jobs {
		if j.Attempt > 1 {
			retried++
		}
	}
	m.retried.WithLabelValues(l).Add(float64(retried))
	m.mu.Lock()
	m.retriedN[q] += int64(retried)
	m.mu.Unlock()
	m.dead.WithLabelValues(l).Add(float64(res.Dead))
}

// ackedJobs records an ack of entries at now, acked of them pending.
func (m *jobMetrics) ackedJobs(q names.Queue, entries []string, acked int64, now time.Time) {
	m.seen(q)
	l := q.String()
	m.acked.WithLabelValues(l).Add(float64(acked))
	m.tally.acked.Add(acked)
	if acked != int64(len(entries)) {
		return // which of them were pending is not known
	}
	h := m.latency.WithLabelValues(l)
	for _, e := range entries {
		id, err := xid.Parse(e)
		if err != nil {
			continue
		}
		if d := now.Sub(time.UnixMilli(int64(id.Ms))); d >= 0 {
			h.Observe(d.Seconds())
		}
	}
}

// redrivenJobs records a redrive.
func (m *jobMetrics) redrivenJobs(q names.Queue, n int) {
	m.seen(q)
	m.redriven.WithLabelValues(q.String()).Add(float64(n))
}

// queueCollector reports each known queue's jobs by state, read from
// Redis at scrape time (at most maxQueueGauges queues, in name order).
type queueCollector struct {
	jobs   *jobMetrics
	status func(context.Context, names.Queue) (echostore.QueueStatus, error)
	desc   *prometheus.Desc
	errs   prometheus.Counter
}

func newQueueCollector(jobs *jobMetrics, status func(context.Context, names.Queue) (echostore.QueueStatus, error)) *queueCollector {
	return &queueCollector{jobs: jobs, status: status,
		desc: prometheus.NewDesc("echostore_queue_jobs",
			"Jobs of the queue by state, read at scrape time: ready (not yet delivered), pending (claimed, not acknowledged), delayed (waiting for their time), dead (dead letters).",
			[]string{"queue", "state"}, nil),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "echostore_queue_status_errors_total",
			Help: "Scrapes that could not read a queue's state from Redis.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	c.errs.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.jobs.mu.Lock()
	qs := make([]names.Queue, 0, len(c.jobs.queues))
	for q := range c.jobs.queues {
		qs = append(qs, q)
	}
	c.jobs.mu.Unlock()
	slices.SortFunc(qs, func(a, b names.Queue) int { return cmp.Compare(a.String(), b.String()) })
	if len(qs) > maxQueueGauges {
		qs = qs[:maxQueueGauges]
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueStatusTimeout)
	defer cancel()
	for _, q := range qs {
		st, err := c.status(ctx, q)
		if err != nil {
			c.errs.Inc()
			continue
		}
		for _, v := range []struct {
			state string
			n     int64
		}{{"ready", st.Lag}, {"pending", st.Pending}, {"delayed", st.Delayed}, {"dead", st.Dead}} {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v.n), q.String(), v.state)
		}
	}
	c.errs.Collect(ch)
}
