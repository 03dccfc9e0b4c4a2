// Package daemon is `syncd run`: cron entries per stream (a pass at start,
// then on each schedule), the HTTP server of /metrics, /healthz, /readyz
// and /status, and a clean stop that lets the batches in flight commit.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
)

// Entry is one cron entry: a schedule and the pass it runs (of every
// stream of a source, or of one form on a schedule of its own).
type Entry struct {
	ID       string // stable identity across reloads (default Name)
	Name     string // names the schedule in errors: "sync.schedule", "schedule of form X"
	Version  string // changes when the configuration that built the entry changes
	Schedule string // a cron spec, UTC
	Pass     func(ctx context.Context) []poller.Result
}

// Options are what the daemon runs: its entries, and where it reports.
type Options struct {
	// Stopping closes when a signal asks the daemon to stop: no new pass
	// starts, and the batches in flight may commit.
	Stopping <-chan struct{}
	Version  string
	Addr     string // where /metrics, /healthz, /readyz and /status are served
	// UnreadyAfter is how long a stream may fail before /readyz fails;
	// Jitter delays each scheduled pass by up to it; Grace is how long the
	// batches in flight have at a stop (logged).
	UnreadyAfter, Jitter, Grace time.Duration
	Entries                     []Entry
	Status                      http.Handler // GET /status
	Metrics                     *metrics.Metrics
	Log                         *zap.Logger
}

// ConfigError is a configuration the daemon cannot run with (an address in
// use, a bad schedule): the operator's to fix.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error { return &ConfigError{Err: err} }

// Run runs each entry's pass at start and then on its schedule, serving
// /metrics, /healthz, /readyz and /status, until opts.Stopping closes or
// ctx ends. The engine refuses a second pass of a stream that is still
// running, so a pass that overruns its slot is skipped and counted, not
// stacked.
func Run(ctx context.Context, opts Options) error {
	log, m := opts.Log, opts.Metrics
	mux := http.NewServeMux()
	mux.Handle("/status", opts.Status)
	mux.Handle("/", m.Handler(func() error { return nil }, opts.UnreadyAfter))
	srv := &http.Server{
		Addr:              opts.Addr,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return configError(fmt.Errorf("server.addr %s: %w: choose a free address", opts.Addr, err))
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", zap.Error(err))
		}
	}()
	log.Info("serving /metrics, /healthz, /readyz, /status", zap.String("addr", ln.Addr().String()))

	c := cron.New(cron.WithLocation(time.UTC))
	var passes sync.WaitGroup
	pass := func(e Entry) func() {
		return func() {
			select {
			case <-opts.Stopping:
				return
			default:
			}
			passes.Add(1)
			defer passes.Done()
			if opts.Jitter > 0 {
				select {
				case <-time.After(rand.N(opts.Jitter)):
				case <-opts.Stopping:
					return
				}
			}
			observe(log, m, e.Pass(ctx))
		}
	}
	firsts := make([]func(), 0, len(opts.Entries))
	for _, e := range opts.Entries {
		f := pass(e)
		if _, err := c.AddFunc(e.Schedule, f); err != nil {
			return configError(fmt.Errorf("%s: %w", e.Name, err))
		}
		firsts = append(firsts, f)
	}
	log.Info("syncd running", zap.Int("entries", len(firsts)), zap.String("version", opts.Version))
	for _, f := range firsts {
		go f() // a first pass at start, without jitter's wait for the next slot
	}
	c.Start()
	select {
	case <-opts.Stopping:
	case <-ctx.Done():
	}
	log.Info("stopping: no new passes; batches in flight may commit", zap.Duration("grace", opts.Grace))
	<-c.Stop().Done()
	passes.Wait()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	log.Info("stopped cleanly")
	return nil
}

// observe reports a pass's results in the metrics and the log.
func observe(log *zap.Logger, m *metrics.Metrics, results []poller.Result) {
	var listing error
	for _, r := range results {
		if r.FormID == "" {
			listing = r.Err
		}
	}
	m.ObserveAccountFailure(listing)
	for _, r := range results {
		if r.FormID == "" {
			continue // the source itself failed (listing the forms): logged where it failed
		}
		if r.Interrupted {
			continue // stopping; the next start takes it from there
		}
		if errors.Is(r.Err, poller.ErrBusy) {
			m.ObserveSkipped(r.Source, r.FormID)
			log.Warn("pass skipped: the previous pass of this stream is still running", zap.String(logkey.Stream, r.FormID))
			continue
		}
		m.ObservePass(metrics.Pass{Source: r.Source, Stream: r.FormID, Rows: r.Rows, Bytes: r.Bytes, Batches: r.Batches, Misfits: r.Misfits,
			Discarded: r.Discarded, ReconciledWindows: r.ReconciledWindows, Versions: r.Versions, Tombstones: r.Tombstones,
			Duration: r.Duration, CoveredEnd: r.CoveredEnd, Err: r.Err})
		if r.Err != nil {
			log.Error("form sync failed", zap.String(logkey.Stream, r.FormID), zap.Error(r.Err))
			continue
		}
		log.Info("form synced", zap.String(logkey.Stream, r.FormID), zap.Int64("rows", r.Rows),
			zap.Int("batches", r.Batches), zap.Int64("requests", r.Requests), zap.Duration("duration", r.Duration))
	}
}
