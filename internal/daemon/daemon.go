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

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/status"
)

// Options are what the command line gives the daemon.
type Options struct {
	// Stopping closes when a signal asks the daemon to stop: no new pass
	// starts, and the batches in flight may commit.
	Stopping <-chan struct{}
	Version  string
}

// ConfigError is a configuration the daemon cannot run with (an address in
// use, a bad schedule): the operator's to fix.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configError(err error) error { return &ConfigError{Err: err} }

// Run runs a pass at start and then on each stream's schedule, serving
// /metrics, /healthz, /readyz and /status, until opts.Stopping closes or
// ctx ends. The
// poller refuses a second pass of a form that is still running, so a pass
// that overruns its slot is skipped and counted, not stacked.
func Run(ctx context.Context, a *app.App, opts Options) error {
	log := a.Log
	m := a.Metrics
	mux := http.NewServeMux()
	mux.Handle("/status", status.Handler(app.StateWhere(a.Cfg), a.Store))
	mux.Handle("/", m.Handler(func() error { return nil }, a.Cfg.Server.UnreadyAfter.D()))
	srv := &http.Server{
		Addr:              a.Cfg.Server.Addr,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln, err := net.Listen("tcp", a.Cfg.Server.Addr)
	if err != nil {
		return configError(fmt.Errorf("server.addr %s: %w: choose a free address", a.Cfg.Server.Addr, err))
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", zap.Error(err))
		}
	}()
	log.Info("serving /metrics, /healthz, /readyz, /status", zap.String("addr", ln.Addr().String()))

	c := cron.New(cron.WithLocation(time.UTC))
	var passes sync.WaitGroup
	pass := func(jobs func(context.Context) ([]poller.Job, error), bookings bool, jitter time.Duration) func() {
		return func() {
			select {
			case <-opts.Stopping:
				return
			default:
			}
			passes.Add(1)
			defer passes.Done()
			if jitter > 0 {
				select {
				case <-time.After(rand.N(jitter)):
				case <-opts.Stopping:
					return
				}
			}
			results := a.Pass(ctx, jobs, bookings)
			var listing error
			for _, r := range results {
				if r.FormID == "" {
					listing = r.Err
				}
			}
			m.ObserveAccountFailure(listing)
			for _, r := range results {
				if r.FormID == "" {
					continue // the source itself failed (listing the forms): app.Pass logged it
				}
				if r.Interrupted {
					continue // stopping; the next start takes it from there
				}
				if errors.Is(r.Err, poller.ErrBusy) {
					m.ObserveSkipped(r.Source, r.FormID)
					log.Warn("pass skipped: the previous pass of this form is still running", zap.String(logkey.Stream, r.FormID))
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
	}
	var entries []func()
	if len(a.Cfg.Forms) == 0 {
		f := pass(a.Jobs, true, a.Cfg.Sync.Jitter.D())
		if _, err := c.AddFunc(a.Cfg.Sync.Schedule, f); err != nil {
			return configError(fmt.Errorf("sync.schedule: %w", err))
		}
		entries = append(entries, f)
	} else {
		all, err := a.Jobs(ctx)
		if err != nil {
			return configError(err)
		}
		for i, fc := range a.Cfg.Forms {
			job := all[i]
			spec := fc.Schedule
			if spec == "" {
				spec = a.Cfg.Sync.Schedule
			}
			f := pass(func(context.Context) ([]poller.Job, error) { return []poller.Job{job}, nil }, false, a.Cfg.Sync.Jitter.D())
			if _, err := c.AddFunc(spec, f); err != nil {
				return configError(fmt.Errorf("schedule of form %s: %w", fc.ID, err))
			}
			entries = append(entries, f)
		}
		if a.Scheduling != nil {
			// The bookings on the default schedule, beside the forms'.
			f := pass(func(context.Context) ([]poller.Job, error) { return nil, nil }, true, a.Cfg.Sync.Jitter.D())
			if _, err := c.AddFunc(a.Cfg.Sync.Schedule, f); err != nil {
				return configError(fmt.Errorf("sync.schedule: %w", err))
			}
			entries = append(entries, f)
		}
	}
	log.Info("syncd running", zap.String("schedule", a.Cfg.Sync.Schedule), zap.Int("entries", len(entries)), zap.String("version", opts.Version))
	for _, f := range entries {
		go f() // a first pass at start, without jitter's wait for the next slot
	}
	c.Start()
	select {
	case <-opts.Stopping:
	case <-ctx.Done():
	}
	log.Info("stopping: no new passes; batches in flight may commit", zap.Duration("grace", a.Cfg.Sync.ShutdownGrace.D()))
	<-c.Stop().Done()
	passes.Wait()
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	log.Info("stopped cleanly")
	return nil
}
