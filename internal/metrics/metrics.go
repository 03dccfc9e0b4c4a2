// Package metrics holds what syncd reports to Prometheus and what its
// health endpoints answer. Everything lives on one Metrics value with its own
// registry, so tests and several daemons in one process never share state.
//
// Every per-stream and per-request series carries an account label: the
// name of the configured account, "default" for a configuration of one
// account (or when the caller names none). Series are bounded by the
// configured accounts times their streams (and, for requests, times the
// API's endpoints and statuses): account names come from the operator's
// configuration, never from the API, and ForgetAccount and ForgetStream drop
// the series of an account or stream that a reload removed.
package metrics

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the counters and gauges an operator alerts on.
type Metrics struct {
	Registry *prometheus.Registry

	// owned, when set, lists the accounts this replica owns (a shared
	// state): /readyz reports them.
	ownedMu sync.Mutex
	owned   func() []string

	requests      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
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
	reloads       *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	triggered     *prometheus.CounterVec
	hookLatency   *prometheus.HistogramVec
	maintenance   *prometheus.CounterVec

	now func() time.Time
	mu  sync.Mutex
	// per stream of each account (stream "": listing the account's forms):
	// when it last succeeded, when its current failing streak began
	forms map[healthKey]*formHealth
}

// DefaultAccount is the account label of a configuration of one account,
// and of whatever names no account.
const DefaultAccount = "default"

func accountLabel(name string) string {
	if name == "" {
		return DefaultAccount
	}
	return name
}

type healthKey struct{ account, stream string }

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
	m := &Metrics{Registry: prometheus.NewRegistry(), now: now, forms: map[healthKey]*formHealth{}}
	f := promauto{m.Registry}
	m.requests = f.counterVec("syncd_requests_total", "Forms API requests by endpoint and HTTP status (0: no answer).", "account", "endpoint", "status")
	m.retries = f.counterVec("syncd_request_retries_total", "Forms API requests that were retries of an earlier attempt.", "account", "endpoint")
	m.rateLimited = f.counterVec("syncd_rate_limited_total", "Forms API answers of 429 Too Many Requests.", "account")
	m.rows = f.counterVec("syncd_rows_written_total", "Submissions committed to the sink.", "account", "source", "stream")
	m.bytes = f.counterVec("syncd_bytes_written_total", "Bytes committed to the sink.", "account", "source", "stream")
	m.batches = f.counterVec("syncd_batches_committed_total", "Batches committed to the sink.", "account", "source", "stream")
	m.misfits = f.counterVec("syncd_values_kept_as_json_total", "Answers that did not fit their column and were kept as JSON text in <column>__v_json.", "account", "source", "stream")
	m.reconciled = f.counterVec("syncd_reconcile_windows_total", "Committed windows read again by reconciles of the lookback.", "account", "source", "stream")
	m.versions = f.counterVec("syncd_reconcile_versions_total", "New versions (edits) and late imports that reconciles wrote.", "account", "source", "stream")
	m.tombstones = f.counterVec("syncd_reconcile_tombstones_total", "Tombstone rows (deletions) that reconciles wrote.", "account", "source", "stream")
	m.discarded = f.counterVec("syncd_unknown_type_answers_discarded_total", "Answers of question types unknown to syncd, discarded as the API contract asks.", "account", "source", "stream")
	m.passDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "syncd_pass_duration_seconds", Help: "Duration of a pass over one form.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
	}, []string{"account", "source", "stream"})
	m.lastSuccess = f.gaugeVec("syncd_last_success_timestamp_seconds", "Unix time of the last successful pass of each form.", "account", "source", "stream")
	m.checkpointLag = f.gaugeVec("syncd_checkpoint_lag_seconds", "How far behind now the form's committed windows end, after its last pass.", "account", "source", "stream")
	m.skipped = f.counterVec("syncd_passes_skipped_total", "Scheduled passes skipped because the previous pass of the form was still running.", "account", "source", "stream")
	m.failures = f.counterVec("syncd_pass_failures_total", "Passes that ended in an error.", "account", "source", "stream")
	m.reloads = f.counterVec("syncd_config_reloads_total", "Configuration reloads (SIGHUP, or the file changed) by result: ok, or error (the running entries kept running).", "result")
	// Both results exist from the start, so that an alert on errors has a
	// series to compare before the first reload.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	// Labels of deliveries come from syncd's own list, never from the
	// request: a forged path cannot add a series.
	m.deliveries = f.counterVec("syncd_webhook_deliveries_total", "Webhook deliveries received, by source and outcome: accepted (a pass is triggered), debounced (a pass already due covers it), ignored (authentic, nothing to do here), refused_auth, refused_size, refused_body, refused_unknown.", "source", "outcome")
	m.triggered = f.counterVec("syncd_webhook_passes_total", "Passes of a stream triggered by webhook deliveries (the scheduled passes are not counted).", "account", "source", "stream")
	m.hookLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "syncd_webhook_latency_seconds", Help: "From a delivery's arrival to the end of the triggered pass that committed what it announced.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}, []string{"source"})
	m.maintenance = f.counterVec("syncd_table_maintenance_total", "Maintenance of a stream's tables after its passes (Iceberg: compaction, snapshot expiry, orphan files), by result: ok or error.", "account", "source", "stream", "result")
	m.Registry.MustRegister(m.passDuration, m.hookLatency, &sinceCollector{m: m},
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

func (p promauto) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	p.r.MustRegister(g)
	return g
}

// sinceCollector computes syncd_seconds_since_last_success at scrape time,
// so the gauge keeps rising while a form is stuck. A form that has failed
// without a success in this process (failing from its first pass, or since
// a restart) counts from its first failure: the time since its last
// success is at least that, and an alert on the gauge must see such a form.
type sinceCollector struct{ m *Metrics }

var sinceDesc = prometheus.NewDesc("syncd_seconds_since_last_success", "Seconds since the last successful pass of each form.", []string{"account", "source", "stream"}, nil)

func (c *sinceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sinceDesc }

func (c *sinceCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	now := c.m.now()
	for k, h := range c.m.forms {
		since := h.lastSuccess
		if since.IsZero() {
			since = h.failingSince
		}
		if since.IsZero() || k.stream == "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(sinceDesc, prometheus.GaugeValue, now.Sub(since).Seconds(), k.account, h.source, k.stream)
	}
}

// ObserveRequest records one attempt of a Forms API request of the default
// account; it satisfies forms.Observer. With many accounts, each account's
// clients report to ForAccount(name) instead.
func (m *Metrics) ObserveRequest(endpoint string, status int, attempt int, d time.Duration, err error) {
	m.ForAccount("").ObserveRequest(endpoint, status, attempt, d, err)
}

// Account is what one account's clients and passes report to: the Metrics
// with the account label set.
type Account struct {
	m    *Metrics
	name string
}

// ForAccount returns the observer of the named account ("" is the default
// account). It satisfies forms.Observer and httpapi.Observer.
func (m *Metrics) ForAccount(name string) *Account {
	return &Account{m: m, name: accountLabel(name)}
}

// ObserveRequest records one attempt of a request of the account.
func (a *Account) ObserveRequest(endpoint string, status int, attempt int, _ time.Duration, _ error) {
	a.m.requests.WithLabelValues(a.name, endpoint, strconv.Itoa(status)).Inc()
	if attempt > 1 {
		a.m.retries.WithLabelValues(a.name, endpoint).Inc()
	}
	if status == http.StatusTooManyRequests {
		a.m.rateLimited.WithLabelValues(a.name).Inc()
	}
}

// ObserveFailure records whether listing the account's forms failed: a
// pass that failed before any form was synced, such as with a rejected
// key; nil ends a failing streak.
func (a *Account) ObserveFailure(err error) {
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	h := a.m.health(healthKey{account: a.name})
	if err == nil {
		h.failingSince, h.lastError = time.Time{}, ""
		return
	}
	if h.failingSince.IsZero() {
		h.failingSince = a.m.now()
	}
	h.lastError = err.Error()
}

// ObserveSkipped counts a scheduled pass of the account's stream skipped
// because one was running.
func (a *Account) ObserveSkipped(source, stream string) {
	a.m.skipped.WithLabelValues(a.name, source, stream).Inc()
}

// Pass is what one pass over one stream reports.
type Pass struct {
	Account   string // the configured account; "" is the default account
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
	// Maintained: the sink maintained the stream's tables after the pass;
	// MaintainFailed: that failed.
	Maintained, MaintainFailed bool
	Err                        error
}

// ObservePass records the outcome of a pass, under p.Account.
func (m *Metrics) ObservePass(p Pass) {
	l := []string{accountLabel(p.Account), p.Source, p.Stream}
	m.rows.WithLabelValues(l...).Add(float64(p.Rows))
	m.bytes.WithLabelValues(l...).Add(float64(p.Bytes))
	m.batches.WithLabelValues(l...).Add(float64(p.Batches))
	m.misfits.WithLabelValues(l...).Add(float64(p.Misfits))
	m.discarded.WithLabelValues(l...).Add(float64(p.Discarded))
	m.reconciled.WithLabelValues(l...).Add(float64(p.ReconciledWindows))
	m.versions.WithLabelValues(l...).Add(float64(p.Versions))
	m.tombstones.WithLabelValues(l...).Add(float64(p.Tombstones))
	m.passDuration.WithLabelValues(l...).Observe(p.Duration.Seconds())
	if p.Maintained {
		result := "ok"
		if p.MaintainFailed {
			result = "error"
		}
		m.maintenance.WithLabelValues(append(l, result)...).Inc()
	}
	now := m.now()
	if !p.CoveredEnd.IsZero() {
		m.checkpointLag.WithLabelValues(l...).Set(now.Sub(p.CoveredEnd).Seconds())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.health(healthKey{account: l[0], stream: p.Stream})
	h.source = p.Source
	if p.Err != nil {
		m.failures.WithLabelValues(l...).Inc()
		if h.failingSince.IsZero() {
			h.failingSince = now
		}
		h.lastError = p.Err.Error()
		return
	}
	h.lastSuccess, h.failingSince, h.lastError = now, time.Time{}, ""
	m.lastSuccess.WithLabelValues(l...).Set(float64(now.UnixNano()) / 1e9)
}

// ObserveAccountFailure records whether listing the default account's
// forms failed; see Account.ObserveFailure.
func (m *Metrics) ObserveAccountFailure(err error) {
	m.ForAccount("").ObserveFailure(err)
}

// ObserveSkipped counts a scheduled pass of the default account's stream
// skipped because one was running.
func (m *Metrics) ObserveSkipped(source, stream string) {
	m.ForAccount("").ObserveSkipped(source, stream)
}

// ObserveReload counts a configuration reload: ok when err is nil.
func (m *Metrics) ObserveReload(err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reloads.WithLabelValues(result).Inc()
}

// ForgetStream drops the series and the health of one stream of an
// account, once a reload has removed it: a removed stream neither counts
// towards the series scraped nor keeps /readyz failing.
func (m *Metrics) ForgetStream(account, source, stream string) {
	l := prometheus.Labels{"account": accountLabel(account), "source": source, "stream": stream}
	for _, v := range m.streamVecs() {
		v.Delete(l)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.forms, healthKey{account: l["account"], stream: stream})
}

// ForgetAccount drops every series and the health of an account, once a
// reload has removed it. Its data stays where it is; only what the daemon
// reports about it goes.
func (m *Metrics) ForgetAccount(account string) {
	l := prometheus.Labels{"account": accountLabel(account)}
	for _, v := range m.streamVecs() {
		v.DeletePartialMatch(l)
	}
	m.requests.DeletePartialMatch(l)
	m.retries.DeletePartialMatch(l)
	m.rateLimited.DeletePartialMatch(l)
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.forms {
		if k.account == l["account"] {
			delete(m.forms, k)
		}
	}
}

// deleter is what the vectors labelled by account, source and stream share.
type deleter interface {
	Delete(prometheus.Labels) bool
	DeletePartialMatch(prometheus.Labels) int
}

func (m *Metrics) streamVecs() []deleter {
	return []deleter{m.rows, m.bytes, m.batches, m.misfits, m.reconciled, m.versions, m.tombstones,
		m.discarded, m.passDuration, m.lastSuccess, m.checkpointLag, m.skipped, m.failures, m.triggered}
}

func (m *Metrics) health(k healthKey) *formHealth {
	h, ok := m.forms[k]
	if !ok {
		h = &formHealth{}
		m.forms[k] = h
	}
	return h
}

// Unready names the first stream (or account, when listing its forms
// failed) failing for longer than grace, with its account and last error;
// "" when all is well. The first in the order of account and stream, so
// that /readyz names the same one from one probe to the next.
func (m *Metrics) Unready(grace time.Duration) (what, lastErr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var failing []healthKey
	for k, h := range m.forms {
		if !h.failingSince.IsZero() && now.Sub(h.failingSince) >= grace {
			failing = append(failing, k)
		}
	}
	if len(failing) == 0 {
		return "", ""
	}
	sort.Slice(failing, func(i, j int) bool {
		a, b := failing[i], failing[j]
		if a.account != b.account {
			return a.account < b.account
		}
		return a.stream < b.stream
	})
	k := failing[0]
	what = "account " + k.account
	if k.stream != "" {
		what = "stream " + k.stream + " of account " + k.account
	}
	return what, m.forms[k].lastError
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
		if what, lastErr := m.Unready(grace); what != "" {
			http.Error(w, "not ready: "+what+" is failing: "+lastErr, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
		m.ownedMu.Lock()
		owned := m.owned
		m.ownedMu.Unlock()
		if owned != nil {
			list := owned()
			fmt.Fprintf(w, "owned accounts (%d): %s\n", len(list), strings.Join(list, ", "))
		}
	})
	return mux
}

// ReportOwned makes /readyz list the accounts owned returns: the share of
// a replica of a shared state.
func (m *Metrics) ReportOwned(owned func() []string) {
	m.ownedMu.Lock()
	defer m.ownedMu.Unlock()
	m.owned = owned
}

// ObserveDelivery counts one webhook delivery of source ("forms" or
// "scheduling") by its outcome.
func (m *Metrics) ObserveDelivery(source, outcome string) {
	m.deliveries.WithLabelValues(source, outcome).Inc()
}

// ObserveTriggered counts a pass of a stream that deliveries triggered.
func (m *Metrics) ObserveTriggered(account, source, stream string) {
	m.triggered.WithLabelValues(accountLabel(account), source, stream).Inc()
}

// ObserveWebhookLatency records the time from a delivery's arrival to the
// end of the pass that committed what it announced.
func (m *Metrics) ObserveWebhookLatency(source string, d time.Duration) {
	m.hookLatency.WithLabelValues(source).Observe(d.Seconds())
}
