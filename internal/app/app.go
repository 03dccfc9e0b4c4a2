// Package app wires a loaded configuration into the parts of a sync: the
// Forms API client, the state store, the sink and the poller. The commands
// in cmd/syncd are thin shells around it.
package app

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/bigquery"
	"github.com/syncd-dev/syncd/internal/sink/blobsink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/suggest"
)

// App holds the open parts of a sync.
type App struct {
	Cfg     *config.Config
	Log     *zap.Logger
	Client  *forms.Client
	Store   state.Store
	Sink    sink.Sink
	Poller  *poller.Poller
	Metrics *metrics.Metrics
	// Scheduling is the scheduling API's bookings source; nil without a
	// scheduling section.
	Scheduling *Scheduling
}

// StateError is a failure to open the state store: in use by another syncd,
// corrupt, or not writable.
type StateError struct{ Err error }

func (e *StateError) Error() string { return e.Err.Error() }
func (e *StateError) Unwrap() error { return e.Err }

// Options are what the command line adds to the configuration.
type Options struct {
	Version  string
	ReadOnly bool // open the state for reading only (state show)
	Now      func() time.Time
}

// NewClient builds the Forms API client the configuration describes; obs,
// when not nil, sees every request attempt.
func NewClient(cfg *config.Config, log *zap.Logger, obs forms.Observer) (*forms.Client, error) {
	c, err := forms.New(forms.Config{
		Observer:    obs,
		BaseURL:     cfg.Source.BaseURL,
		APIKey:      cfg.Source.APIKey.Reveal(),
		RateLimit:   cfg.Source.RateLimit,
		MaxAttempts: cfg.Source.MaxAttempts,
		Timeout:     cfg.Source.Timeout.D(),
		Logger:      log.Named("forms"),
	})
	if err != nil {
		return nil, fmt.Errorf("set up the Forms API client: %w", err)
	}
	return c, nil
}

// NewSink opens the sink the configuration names.
func NewSink(cfg *config.Config, version string, log *zap.Logger) (sink.Sink, error) {
	switch cfg.Sink.Type {
	case "parquet":
		enc := parquetsink.EncodeOptions{
			Compression:  parquetsink.Compression(cfg.Sink.Parquet.Compression),
			RowGroupRows: cfg.Sink.Parquet.RowGroupRows,
		}
		if blobstore.IsURL(cfg.Sink.Parquet.Path) {
			s, err := blobsink.New(context.Background(), blobsink.Options{
				URL: cfg.Sink.Parquet.Path, Version: version, Logger: log.Named("sink"), Encode: enc,
				Layout: parquetsink.Layout(cfg.Sink.Parquet.Partition),
			})
			if err != nil {
				return nil, fmt.Errorf("open the parquet sink: %w", err)
			}
			return s, nil
		}
		s, err := parquetsink.New(parquetsink.Options{
			Root: cfg.Sink.Parquet.Path, Version: version, Logger: log.Named("sink"), Encode: enc,
			Layout: parquetsink.Layout(cfg.Sink.Parquet.Partition),
		})
		if err != nil {
			return nil, fmt.Errorf("open the parquet sink: %w", err)
		}
		return s, nil
	case "bigquery":
		bq := cfg.Sink.BigQuery
		s, err := bigquery.New(context.Background(), bigquery.Options{
			Project: bq.Project, Dataset: bq.Dataset, Location: bq.Location, TablePrefix: bq.TablePrefix,
			Clustering: bq.Clustering, Logger: log.Named("sink"), Version: version,
			Encode:        parquetsink.EncodeOptions{Compression: parquetsink.Compression(cfg.Sink.Parquet.Compression)},
			ClientOptions: bigquery.EndpointOptions(bq.Endpoint),
			MaxAttempts:   bq.MaxAttempts,
			MinBackoff:    bq.MinBackoff.D(),
			MaxBackoff:    bq.MaxBackoff.D(),
		})
		if err != nil {
			return nil, fmt.Errorf("open the bigquery sink: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("sink type %q is not one of parquet, bigquery", cfg.Sink.Type)
	}
}

// OpenStore opens the state store the configuration names: the object at
// state.url (a writer takes its lease), or the local file state.path.
func OpenStore(ctx context.Context, cfg *config.Config, readOnly bool) (state.Store, error) {
	if cfg.State.URL != "" {
		return state.OpenObject(ctx, state.ObjectOptions{URL: cfg.State.URL, ReadOnly: readOnly, LeaseTTL: cfg.State.LeaseTTL.D()})
	}
	return state.OpenBolt(ctx, state.BoltOptions{Path: cfg.State.Path, ReadOnly: readOnly})
}

// StateWhere is where the configured state lives, for messages.
func StateWhere(cfg *config.Config) string {
	if cfg.State.URL != "" {
		return cfg.State.URL
	}
	return cfg.State.Path
}

// OutputWhere is where the configured output lives, for messages.
func OutputWhere(cfg *config.Config) string {
	if cfg.Sink.Type == "bigquery" && cfg.Sink.BigQuery != nil {
		return "BigQuery dataset " + cfg.Sink.BigQuery.Project + "." + cfg.Sink.BigQuery.Dataset
	}
	return cfg.Sink.Parquet.Path
}

// Open opens every part. The state store is opened first: a second syncd on
// the same state fails here, before it makes a single request.
func Open(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*App, error) {
	store, err := OpenStore(ctx, cfg, opts.ReadOnly)
	if err != nil {
		return nil, &StateError{Err: err}
	}
	a := &App{Cfg: cfg, Log: log, Store: store, Metrics: metrics.New(opts.Now)}
	if opts.ReadOnly {
		return a, nil
	}
	if a.Client, err = NewClient(cfg, log, a.Metrics); err != nil {
		a.Close()
		return nil, err
	}
	if a.Sink, err = NewSink(cfg, opts.Version, log); err != nil {
		a.Close()
		return nil, err
	}
	// A writer that loses its state lease abandons its uploads in flight.
	if o, ok := store.(*state.Object); ok {
		if s, ok := a.Sink.(sink.LeaseBound); ok {
			s.StopWhen(o.Lost())
		}
	}
	if cfg.Scheduling != nil {
		if a.Scheduling, err = openScheduling(cfg, store, log, a.Metrics); err != nil {
			a.Close()
			return nil, err
		}
	}
	// A syncd killed while it fetched a large batch left its spool behind.
	if n, err := spool.CleanStale(cfg.Sync.SpoolDir); err != nil {
		log.Warn("could not clean stale spool folders", zap.Error(err))
	} else if n > 0 {
		log.Info("removed spool folders of syncd processes that no longer run", zap.Int("folders", n))
	}
	a.Poller = poller.New(a.Sink, a.Store, poller.Options{
		MaxRowsPerBatch: cfg.Sync.MaxRowsPerBatch,
		ChunkRows:       cfg.Sync.ChunkRows,
		SpoolDir:        cfg.Sync.SpoolDir,
		SafetyLag:       cfg.Sync.SafetyLag.D(),
		Lookback:        cfg.Sync.Lookback.D(),
		ReconcileEvery:  cfg.Sync.ReconcileEvery.D(),
		StateName:       StateWhere(cfg),
		OutputName:      OutputWhere(cfg),
		Now:             opts.Now,
		Logger:          log.Named("poller"),
	})
	return a, nil
}

// Close releases everything App holds.
func (a *App) Close() error {
	var errs []error
	if a.Sink != nil {
		errs = append(errs, a.Sink.Close())
	}
	if a.Store != nil {
		errs = append(errs, a.Store.Close())
	}
	return errors.Join(errs...)
}

// Jobs are the configured forms, or every form of the account when the
// configuration lists none.
func (a *App) Jobs(ctx context.Context) ([]poller.Job, error) {
	if len(a.Cfg.Forms) > 0 {
		jobs := make([]poller.Job, 0, len(a.Cfg.Forms))
		for _, f := range a.Cfg.Forms {
			start := f.StartDate.Time
			if start.IsZero() {
				start = a.Cfg.Sync.StartDate.Time
			}
			jobs = append(jobs, poller.Job{FormID: f.ID, Table: f.Table, Start: start})
		}
		return jobs, nil
	}
	list, err := a.Client.ListForms(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the account's forms (forms: [] in the config means every form): %w", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].FormID < list[j].FormID })
	jobs := make([]poller.Job, 0, len(list))
	for _, f := range list {
		jobs = append(jobs, poller.Job{FormID: f.FormID, Start: a.Cfg.Sync.StartDate.Time})
	}
	return jobs, nil
}

// SyncAll runs one live pass over every job, at most concurrency forms at a
// time, all under the client's shared per-key rate limit. One form failing
// does not stop the others.
func (a *App) SyncAll(ctx context.Context, jobs []poller.Job, concurrency int) []poller.Result {
	if concurrency < 1 {
		concurrency = 1
	}
	results := make([]poller.Result, len(jobs))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = poller.Result{Source: poller.SourceForms, FormID: job.FormID, Err: fmt.Errorf("sync form %s: %w", job.FormID, ctx.Err())}
				return
			}
			defer func() { <-sem }()
			if a.Poller.Draining() {
				// Stopping: a form not started yet is left for the next pass.
				results[i] = poller.Result{Source: poller.SourceForms, FormID: job.FormID, Interrupted: true}
				return
			}
			results[i] = a.Poller.Sync(ctx, a.FormStream(job), job.Start)
			var nf *forms.NotFoundError
			if errors.As(results[i].Err, &nf) && nf.What == "form" && nf.ID == job.FormID {
				results[i].Err = a.missingForm(ctx, job.FormID, results[i].Err)
			}
		}()
	}
	wg.Wait()
	return results
}

// Job is the job of one form: as configured, or with the defaults when the
// configuration does not list it.
func (a *App) Job(formID string) poller.Job {
	job := poller.Job{FormID: formID, Start: a.Cfg.Sync.StartDate.Time}
	for _, f := range a.Cfg.Forms {
		if f.ID == formID {
			job.Table = f.Table
			if !f.StartDate.IsZero() {
				job.Start = f.StartDate.Time
			}
		}
	}
	return job
}

// missingForm is the error of a configured form the account does not have
// (deleted since, or mistyped), naming the closest ids: that form fails, the
// others sync.
func (a *App) missingForm(ctx context.Context, formID string, err error) error {
	hint := ""
	if list, lerr := a.Client.ListForms(ctx); lerr == nil {
		known := make([]string, 0, len(list))
		for _, f := range list {
			known = append(known, f.FormID)
		}
		if p := suggest.Phrase(formID, known); p != "" {
			hint = " (" + p + ")"
		}
	}
	return &MissingFormError{Form: formID, Hint: hint, Err: err}
}

// MissingFormError is a configured form the account does not have.
type MissingFormError struct {
	Form string
	Hint string // " (closest: a, b)" or ""
	Err  error  // the client's *forms.NotFoundError
}

func (e *MissingFormError) Error() string {
	return fmt.Sprintf("form %s does not exist in the account%s: it was deleted, or its id in forms[] is mistyped; fix or remove it in forms[] (what was synced of it stays in the output and the state); the other forms sync", e.Form, e.Hint)
}

func (e *MissingFormError) Unwrap() error { return e.Err }

// UnknownFormError names form ids the account does not have, with the ids
// closest to each.
type UnknownFormError struct {
	IDs  []string
	Hint []string // per id: "closest: a, b" or ""
}

func (e *UnknownFormError) Error() string {
	var b strings.Builder
	for i, id := range e.IDs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "form %s does not exist in this account", id)
		if e.Hint[i] != "" {
			b.WriteString(" (" + e.Hint[i] + ")")
		}
	}
	b.WriteString(": check the id with `syncd forms`; nothing was written")
	return b.String()
}

// CheckForms makes sure every id is a form of the account, with one request
// (the account's form list). It is how a typo becomes an error before
// anything is written.
func CheckForms(ctx context.Context, client *forms.Client, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := client.ListForms(ctx)
	if err != nil {
		return fmt.Errorf("list the account's forms to check the form ids: %w", err)
	}
	known := make([]string, 0, len(list))
	have := make(map[string]bool, len(list))
	for _, f := range list {
		known = append(known, f.FormID)
		have[f.FormID] = true
	}
	var bad UnknownFormError
	for _, id := range ids {
		if !have[id] {
			bad.IDs = append(bad.IDs, id)
			bad.Hint = append(bad.Hint, suggest.Phrase(id, known))
		}
	}
	if len(bad.IDs) > 0 {
		return &bad
	}
	return nil
}

// Pass is one live pass over the forms that jobs lists and, when bookings
// is set and the scheduling API is configured, the bookings: what `once`
// runs, and each of `run`'s cron entries. A source failing never stops
// another: when listing the forms fails, the result says so (Source set,
// FormID empty) and the bookings still sync.
func (a *App) Pass(ctx context.Context, jobs func(context.Context) ([]poller.Job, error), bookings bool) []poller.Result {
	var results []poller.Result
	list, err := jobs(ctx)
	if err != nil {
		a.Log.Error("listing the account's forms failed; no form is synced in this pass, the other sources are", zap.String(logkey.Source, poller.SourceForms), zap.Error(err))
		results = append(results, poller.Result{Source: poller.SourceForms, Err: err})
	}
	results = append(results, a.SyncAll(ctx, list, a.Cfg.Sync.Concurrency)...)
	if bookings && a.Scheduling != nil {
		results = append(results, a.SyncBookings(ctx))
	}
	return results
}

// SyncBookings runs the live pass of the scheduling API's bookings. A
// bookings pass that fails (a sign-in to renew) leaves the forms' alone.
func (a *App) SyncBookings(ctx context.Context) poller.Result {
	if a.Poller.Draining() {
		return poller.Result{Source: "scheduling", FormID: a.Scheduling.Stream.Key(), Table: a.Scheduling.Stream.Table(), Interrupted: true}
	}
	return a.Poller.Sync(ctx, a.Scheduling.Stream, a.Scheduling.Start.Time)
}

// FormStream is the stream of a form's job.
func (a *App) FormStream(job poller.Job) *formsource.Stream {
	return FormStream(a.Cfg, a.Client, job, a.Log)
}

// FormStream is the stream of a form's job read through client, as the
// configuration tunes it.
func FormStream(cfg *config.Config, client formsource.API, job poller.Job, log *zap.Logger) *formsource.Stream {
	return formsource.NewStream(client, job.FormID, job.Table, formsource.StreamOptions{
		PageSize: cfg.Sync.PageSize, IncludeEditLink: cfg.Sync.IncludeEditLink, Logger: log.Named("poller"),
	})
}

// AdoptTargets are the streams `syncd state adopt` rebuilds: the forms of
// jobs, and the bookings when the scheduling API is configured.
func (a *App) AdoptTargets(jobs []poller.Job, bookings bool) []poller.AdoptTarget {
	out := make([]poller.AdoptTarget, 0, len(jobs)+1)
	for _, j := range jobs {
		out = append(out, poller.TargetOf(a.FormStream(j)))
	}
	if bookings && a.Scheduling != nil {
		out = append(out, poller.TargetOf(a.Scheduling.Stream))
	}
	return out
}

// DaemonEntries are the cron entries of `syncd run`: with no forms listed,
// one pass of every form of the account and the bookings on
// sync.schedule; with forms listed, one entry per form on its own schedule
// (or sync.schedule), and the bookings on sync.schedule.
func (a *App) DaemonEntries(ctx context.Context) ([]daemon.Entry, error) {
	if len(a.Cfg.Forms) == 0 {
		return []daemon.Entry{{Name: "sync.schedule", Schedule: a.Cfg.Sync.Schedule,
			Pass: func(ctx context.Context) []poller.Result { return a.Pass(ctx, a.Jobs, true) }}}, nil
	}
	all, err := a.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	entries := make([]daemon.Entry, 0, len(all)+1)
	for i, fc := range a.Cfg.Forms {
		job := all[i]
		spec := fc.Schedule
		if spec == "" {
			spec = a.Cfg.Sync.Schedule
		}
		one := func(context.Context) ([]poller.Job, error) { return []poller.Job{job}, nil }
		entries = append(entries, daemon.Entry{Name: "schedule of form " + fc.ID, Schedule: spec,
			Pass: func(ctx context.Context) []poller.Result { return a.Pass(ctx, one, false) }})
	}
	if a.Scheduling != nil {
		none := func(context.Context) ([]poller.Job, error) { return nil, nil }
		entries = append(entries, daemon.Entry{Name: "sync.schedule", Schedule: a.Cfg.Sync.Schedule,
			Pass: func(ctx context.Context) []poller.Result { return a.Pass(ctx, none, true) }})
	}
	return entries, nil
}

// DaemonOptions are what `syncd run` runs: the entries, the server and
// what it serves.
func (a *App) DaemonOptions(ctx context.Context, stopping <-chan struct{}, version string) (daemon.Options, error) {
	entries, err := a.DaemonEntries(ctx)
	if err != nil {
		return daemon.Options{}, err
	}
	return daemon.Options{
		Stopping: stopping, Version: version, Addr: a.Cfg.Server.Addr,
		UnreadyAfter: a.Cfg.Server.UnreadyAfter.D(), Jitter: a.Cfg.Sync.Jitter.D(), Grace: a.Cfg.Sync.ShutdownGrace.D(),
		Entries: entries, Status: status.Handler(StateWhere(a.Cfg), a.Store), Metrics: a.Metrics, Log: a.Log,
	}, nil
}
