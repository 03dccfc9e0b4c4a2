// Package metrics holds what syncd reports to Prometheus and what its
// health endpoints answer. Everything lives on one Metrics value with its own
// registry, so tests and several daemons in one process never share state.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the counters and gauges an operator alerts on.
type Metrics struct {
	Registry *prometheus.Registry

	requests      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	rateLimited   prometheus.Counter
	rows          *prometheus.CounterVec
	bytes         *prometheus.CounterVec
	batches       *prometheus.CounterVec
	misfits       *prometheus.CounterVec
	reconciled    *prometheus.CounterVec
	versions      *prometheus.CounterVec
	tombstones    *prometheus.CounterVec
	discarded     *prometheus.CounterVec
	passDuration  *prometheus.HistogramVec
	lastSuccess   *prometheus.GaugeVec
	checkpointLag *prometheus.GaugeVec
	skipped       *prometheus.CounterVec
	failures      *prometheus.CounterVec

	now func() time.Time
	mu  sync.Mutex
	// per form: when it last succeeded, when its current failing streak began
	forms map[string]*formHealth
}

type formHealth struct {
	source       string
	lastSuccess  time.Time
	failingSince time.Time // zero while the last pass succeeded
	lastError    string
}

// New registers every metric on a fresh registry.
func New(now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{Registry: prometheus.NewRegistry(), now: now, forms: map[string]*formHealth{}}
	f := promauto{m.Registry}
	m.requests = f.counterVec("syncd_requests_total", "Forms API requests by endpoint and HTTP status (0: no answer).", "endpoint", "status")
	m.retries = f.counterVec("syncd_request_retries_total", "Forms API requests that were retries of an earlier attempt.", "endpoint")
	m.rateLimited = f.counter("syncd_rate_limited_total", "Forms API answers of 429 Too Many Requests.")
	m.rows = f.counterVec("syncd_rows_written_total", "Submissions committed to the sink.", "source", "stream")
	m.bytes = f.counterVec("syncd_bytes_written_total", "Bytes committed to the sink.", "source", "stream")
	m.batches = f.counterVec("syncd_batches_committed_total", "Batches committed to the sink.", "source", "stream")
	m.misfits = f.counterVec("syncd_values_kept_as_json_total", "Answers that did not fit their column and were kept as JSON text in <column>__v_json.", "source", "stream")
	m.reconciled = f.counterVec("syncd_reconcile_windows_total", "Committed windows read again by reconciles of the lookback.", "source", "stream")
	m.versions = f.counterVec("syncd_reconcile_versions_total", "New versions (edits) and late imports that reconciles wrote.", "source", "stream")
	m.tombstones = f.counterVec("syncd_reconcile_tombstones_total", "Tombstone rows (deletions) that reconciles wrote.", "source", "stream")
	m.discarded = f.counterVec("syncd_unknown_type_answers_discarded_total", "Answers of question types unknown to syncd, discarded as the API contract asks.", "source", "stream")
	m.passDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "syncd_pass_duration_seconds", Help: "Duration of a pass over one form.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
	}, []string{"source", "stream"})
	m.lastSuccess = f.gaugeVec("syncd_last_success_timestamp_seconds", "Unix time of the last successful pass of each form.", "source", "stream")
	m.checkpointLag = f.gaugeVec("syncd_checkpoint_lag_seconds", "How far behind now the form's committed windows end, after its last pass.", "source", "stream")
	m.skipped = f.counterVec("syncd_passes_skipped_total", "Scheduled passes skipped because the previous pass of the form was still running.", "source", "stream")
	m.failures = f.counterVec("syncd_pass_failures_total", "Passes that ended in an error.", "source", "stream")
	m.Registry.MustRegister(m.passDuration, &sinceCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// promauto registers on a given registry (the library's promauto package
// does the same through a factory; this keeps the call sites short).
type promauto struct{ r *prometheus.Registry }

func (p promauto) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	p.r.MustRegister(c)
	return c
}

func (p promauto) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	p.r.MustRegister(c)
	return c
}

func (p promauto) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	p.r.MustRegister(g)
	return g
}

// sinceCollector computes syncd_seconds_since_last_success at scrape time,
// so the gauge keeps rising while a form is stuck.
type sinceCollector struct{ m *Metrics }

var sinceDesc = prometheus.NewDesc("syncd_seconds_since_last_success", "Seconds since the last successful pass of each form.", []string{"source", "stream"}, nil)

func (c *sinceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sinceDesc }

func (c *sinceCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	now := c.m.now()
	for form, h := range c.m.forms {
		if h.lastSuccess.IsZero() || form == "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(sinceDesc, prometheus.GaugeValue, now.Sub(h.lastSuccess).Seconds(), h.source, form)
	}
}

// ObserveRequest records one attempt of a Forms API request; it satisfies
// forms.Observer.
func (m *Metrics) ObserveRequest(endpoint string, status int, attempt int, _ time.Duration, _ error) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
	if attempt > 1 {
		m.retries.WithLabelValues(endpoint).Inc()
	}
	if status == http.StatusTooManyRequests {
		m.rateLimited.Inc()
	}
}

// Pass is what one pass over one stream reports.
type Pass struct {
	Source    string // forms, scheduling
	Stream    string // the stream: a form id, scheduling/bookings
	Rows      int64
	Bytes     int64
	Batches   int
	Misfits   int64
	Discarded int64
	// What a reconcile in the pass did.
	ReconciledWindows, Versions, Tombstones int64
	Duration                                time.Duration
	CoveredEnd                              time.Time
	Err                                     error
}

// ObservePass records the outcome of a pass.
func (m *Metrics) ObservePass(p Pass) {
	m.rows.WithLabelValues(p.Source, p.Stream).Add(float64(p.Rows))
	m.bytes.WithLabelValues(p.Source, p.Stream).Add(float64(p.Bytes))
	m.batches.WithLabelValues(p.Source, p.Stream).Add(float64(p.Batches))
	m.misfits.WithLabelValues(p.Source, p.Stream).Add(float64(p.Misfits))
	m.discarded.WithLabelValues(p.Source, p.Stream).Add(float64(p.Discarded))
	m.reconciled.WithLabelValues(p.Source, p.Stream).Add(float64(p.ReconciledWindows))
	m.versions.WithLabelValues(p.Source, p.Stream).Add(float64(p.Versions))
	m.tombstones.WithLabelValues(p.Source, p.Stream).Add(float64(p.Tombstones))
	m.passDuration.WithLabelValues(p.Source, p.Stream).Observe(p.Duration.Seconds())
	now := m.now()
	if !p.CoveredEnd.IsZero() {
		m.checkpointLag.WithLabelValues(p.Source, p.Stream).Set(now.Sub(p.CoveredEnd).Seconds())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.health(p.Stream)
	h.source = p.Source
	if p.Err != nil {
		m.failures.WithLabelValues(p.Source, p.Stream).Inc()
		if h.failingSince.IsZero() {
			h.failingSince = now
		}
		h.lastError = p.Err.Error()
		return
	}
	h.lastSuccess, h.failingSince, h.lastError = now, time.Time{}, ""
	m.lastSuccess.WithLabelValues(p.Source, p.Stream).Set(float64(now.UnixNano()) / 1e9)
}

// ObserveAccountFailure records a pass that failed before any form was
// synced, such as listing the account's forms with a rejected key.
func (m *Metrics) ObserveAccountFailure(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.health("")
	if err == nil {
		h.failingSince, h.lastError = time.Time{}, ""
		return
	}
	if h.failingSince.IsZero() {
		h.failingSince = m.now()
	}
	h.lastError = err.Error()
}

// ObserveSkipped counts a scheduled pass skipped because one was running.
func (m *Metrics) ObserveSkipped(source, stream string) {
	m.skipped.WithLabelValues(source, stream).Inc()
}

func (m *Metrics) health(form string) *formHealth {
	h, ok := m.forms[form]
	if !ok {
		h = &formHealth{}
		m.forms[form] = h
	}
	return h
}

// Unready names the first form (or "account") failing for longer than
// grace, with its last error; "" when all is well.
func (m *Metrics) Unready(grace time.Duration) (what, lastErr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for form, h := range m.forms {
		if !h.failingSince.IsZero() && now.Sub(h.failingSince) >= grace {
			if form == "" {
				form = "account"
			}
			return form, h.lastError
		}
	}
	return "", ""
}

// Handler serves /metrics, /healthz and /readyz. ready reports whether the
// parts the daemon needs are open; grace is how long a form may fail before
// the daemon reports unready.
func (m *Metrics) Handler(ready func() error, grace time.Duration) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if form, lastErr := m.Unready(grace); form != "" {
			http.Error(w, "not ready: "+form+" is failing: "+lastErr, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}
