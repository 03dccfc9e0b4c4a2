// Package app wires a loaded configuration into the parts of a sync: the
// sources listed in sources.go (the forms, the bookings), the state
// store, the sink and the poller. The commands in cmd/syncd are thin shells
// around it.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/arrowpool"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/connect"
	"github.com/syncd-dev/syncd/internal/daemon"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/metrics"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/spool"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/suggest"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// App holds the open parts of a sync: the state store and metrics every
// account shares, and the accounts.
type App struct {
	Cfg     *config.Config
	Log     *zap.Logger
	Store   state.Store
	Metrics *metrics.Metrics
	// Accounts are the open accounts, in the configuration's order: all
	// of them, or those Options.Accounts names.
	Accounts []*Account

	opts     Options
	mu       sync.RWMutex // guards Accounts and draining against a reload
	draining bool
	// current is the configuration last applied: a reload changes its
	// accounts, never the settings the rest of App was opened with.
	current atomic.Pointer[config.Config]
	// gate bounds the batches in flight across accounts (sync.max_batches);
	// planGate the planned windows holding a page planning read, four per
	// batch slot: a plan holds its slot while its request waits for the
	// key's rate limit, and a pass with nothing new is all plans, so one
	// slot per batch would make the accounts take turns at planning
	// (measured: 100 accounts' pass with nothing new, 6.4 s -> 10.1 s).
	gate, planGate *semaphore.Weighted
	// alloc is the Arrow memory of every account's batches: one pool, so
	// that a buffer one account frees serves the next.
	alloc *arrowpool.Pool
	// shared is set for `syncd run` on a shared state (state.shared): a
	// coordinator claims the accounts, and owns says which are this
	// replica's.
	shared bool
	owns   map[string]bool
	// claims counts, by namespace, the open accounts that write on this
	// process's claim of the state (see claim); claimMu guards it and is
	// held across the Claim or Release it decides on.
	claimMu sync.Mutex
	claims  map[string]int
	// streamLocks are shared by every account's poller: an account a
	// reload opens again runs no pass of a stream while the account it
	// replaces is still in one.
	streamLocks *poller.StreamLocks
	// sources are the listed sources (sources.go), each opened for every
	// account that uses it.
	sources []source.Source
}

// Account is one account's open parts: its listed sources (the one whose
// streams are chosen per pass apart, see jobs), its sink (its share of the
// output) and its poller.
type Account struct {
	Name   string
	Cfg    config.Account
	Log    *zap.Logger
	Sink   sink.Sink
	Poller *poller.Poller
	// jobs is the listed source whose streams a pass chooses by id
	// (source.Jobs: the forms), opened for the account; nil when the
	// account does not use it. Its streams are chosen by a pass's caller
	// (a command's ids, a delivery's stream, one daemon entry each) and
	// synced concurrently (SyncAll); jobsName is its source's name.
	jobs     source.Jobs
	jobsName string
	// sources are the other listed sources (sources.go) the account uses,
	// in the list's order.
	sources []openSource

	app *App
	// version identifies what the account was opened from (its settings
	// and key): a reload reopens it when that changes.
	version string
	// uses counts what holds the account (hold, drop): its daemon entries
	// and the passes deliveries triggered. The last use of an account a
	// reload removed or replaced closes it, and retires it: no use starts
	// after. useMu guards both.
	useMu     sync.Mutex
	uses      int
	retired   bool
	closeOnce sync.Once
	closeErr  error
	// closed is closed once the account is closed; release gives back its
	// share of the claim on the state (nil when a coordinator holds it).
	closed  chan struct{}
	release func() error
	// regMu guards the webhooks record's read-modify-write (the entries of
	// one account's forms run at once) and noHookScope; seenMu guards
	// listed, delivered and scheduled, which deliveries read and write
	// without waiting for a registration's requests.
	regMu, seenMu sync.Mutex
	// listed are the forms of the last full listing (nil: none yet).
	listed map[string]bool
	// noHookScope are the sources whose sign-in lacks the scope to
	// register webhooks (source.ErrNoWebhookScope, said once).
	noHookScope map[string]bool
	// delivered is when the last delivery of each form arrived; scheduled
	// when its last scheduled pass started (a silent webhook: see
	// reregisterSilent).
	delivered, scheduled map[string]time.Time
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
	// Accounts, when set, opens only these accounts (--account); an
	// unknown name is an UnknownAccountError.
	Accounts []string
	// Shard, when set, opens only the accounts of that static shard.
	Shard *Shard
	// Shared opens no account at first: on a shared state (state.shared)
	// `syncd run` opens the accounts a coordinator claims (SetOwned,
	// Reload).
	Shared bool
	// PoisonFreedBuffers overwrites every Arrow buffer as it is freed, so
	// that a buffer read after it was given back shows as wrong output
	// (arrowpool.Options.Poison). Tests set it; test binaries always do.
	PoisonFreedBuffers bool
}

// UnknownAccountError names account names the configuration does not have.
type UnknownAccountError struct {
	Names []string
	Known []string
}

func (e *UnknownAccountError) Error() string {
	var b strings.Builder
	for i, n := range e.Names {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "account %s is not in the configuration", n)
		if p := suggest.Phrase(n, e.Known); p != "" {
			b.WriteString(" (" + p + ")")
		}
	}
	b.WriteString(": check --account against `syncd accounts`; nothing was written")
	return b.String()
}

// SelectAccounts is the configured accounts that names selects (all of
// them when names is empty), in the configuration's order.
func SelectAccounts(cfg *config.Config, names []string) ([]config.Account, error) {
	all := cfg.AccountList()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []config.Account
	known := make([]string, 0, len(all))
	for _, a := range all {
		known = append(known, a.Name)
		if want[a.Name] {
			out = append(out, a)
			delete(want, a.Name)
		}
	}
	if len(want) > 0 {
		bad := &UnknownAccountError{Known: known}
		for _, n := range names {
			if want[n] {
				bad.Names = append(bad.Names, n)
				delete(want, n)
			}
		}
		return nil, bad
	}
	return out, nil
}

// OpenStore opens the state store the configuration names: the objects at
// state.url (a writer claims the accounts it writes), or the local file
// state.path.
func OpenStore(ctx context.Context, cfg *config.Config, readOnly bool) (state.Store, error) {
	if cfg.State.URL != "" {
		// Each account's state in its own object under its own lease: a
		// writer claims the accounts it syncs (Claim), and processes that
		// share the bucket sync different accounts at once.
		return state.OpenSharded(ctx, state.ShardedOptions{URL: cfg.State.URL, ReadOnly: readOnly, LeaseTTL: cfg.State.LeaseTTL.D()})
	}
	return state.OpenBolt(ctx, state.BoltOptions{Path: cfg.State.Path, ReadOnly: readOnly})
}

// OpenStoreOf opens the state to write what the account of namespace keeps
// there (its sign-ins): on a state split by account it claims that account,
// and a *state.LockedError names the syncd that holds it.
func OpenStoreOf(ctx context.Context, cfg *config.Config, namespace string) (state.Store, error) {
	store, err := OpenStore(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	if c, ok := store.(state.Claimer); ok {
		if err := c.Claim(ctx, namespace); err != nil {
			store.Close()
			return nil, err
		}
	}
	return store, nil
}

// StateWhere is where the configured state lives, for messages.
func StateWhere(cfg *config.Config) string { return cfg.State.Where() }

// Open opens every part. The state store is opened first: a second syncd on
// the same state fails here, before it makes a single request.
func Open(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*App, error) {
	accounts, err := SelectAccounts(cfg, opts.Accounts)
	if err != nil {
		return nil, err
	}
	if opts.Shard != nil && cfg.State.URL == "" {
		return nil, ErrShardNeedsBucket
	}
	accounts = ShardAccounts(accounts, opts.Shard)
	store, err := OpenStore(ctx, cfg, opts.ReadOnly)
	if err != nil {
		return nil, &StateError{Err: err}
	}
	a := &App{Cfg: cfg, Log: log, Store: store, Metrics: metrics.New(opts.Now), opts: opts,
		gate:        semaphore.NewWeighted(int64(cfg.Sync.MaxBatches)),
		planGate:    semaphore.NewWeighted(4 * int64(cfg.Sync.MaxBatches)),
		alloc:       arrowpool.ForProcess(opts.PoisonFreedBuffers),
		streamLocks: poller.NewStreamLocks(), sources: sourceList()}
	a.current.Store(cfg)
	a.shared = opts.Shared
	if opts.ReadOnly {
		return a, nil
	}
	// A syncd killed while it fetched a large batch left its spool behind.
	if n, err := spool.CleanStale(cfg.Sync.SpoolDir); err != nil {
		log.Warn("could not clean stale spool folders", zap.Error(err))
	} else if n > 0 {
		log.Info("removed spool folders of syncd processes that no longer run", zap.Int(logkey.Folders, n))
	}
	for _, ac := range accounts {
		if a.shared {
			break // the coordinator claims them
		}
		acct, err := a.OpenAccount(ctx, ac)
		if err != nil {
			a.Close()
			return nil, err
		}
		a.Accounts = append(a.Accounts, acct)
	}
	return a, nil
}

// OpenAccount opens the parts of one account of the configuration. On a
// state split by account it claims the account's state first, unless a
// coordinator does (a shared state: see Shared).
func (a *App) OpenAccount(ctx context.Context, ac config.Account) (*Account, error) {
	cfg, log := a.Cfg, a.Log
	if a.Cfg.MultiAccount() {
		log = log.With(zap.String(logkey.Account, ac.Name))
	}
	acct := &Account{Name: ac.Name, Cfg: ac, Log: log, app: a, closed: make(chan struct{})}
	var err error
	if acct.version, err = accountVersion(ac, a.sources); err != nil {
		return nil, err
	}
	ns := ac.Namespace()
	var lost <-chan struct{}
	if c, ok := a.Store.(state.Claimer); ok {
		if !a.shared {
			if acct.release, err = a.claim(ctx, c, ns); err != nil {
				return nil, &StateError{Err: fmt.Errorf("claim the state of account %s: %w", ac.Name, err)}
			}
		}
		lost = c.Lost(ns)
	}
	if acct.Sink, err = NewAccountSink(cfg, ns, a.opts.Version, log, a.alloc); err != nil {
		acct.Close()
		return nil, fmt.Errorf("account %s: %w", ac.Name, err)
	}
	// A writer that loses its state lease abandons its uploads in flight.
	if o, ok := a.Store.(state.Leased); ok {
		lost = o.Lost()
	}
	if s, ok := acct.Sink.(sink.LeaseBound); ok && lost != nil {
		s.StopWhen(lost)
	}
	if err := a.openSources(ctx, acct); err != nil {
		acct.Close()
		return nil, err
	}
	acct.Poller = poller.New(acct.Sink, a.Store, poller.Options{
		MaxRowsPerBatch: cfg.Sync.MaxRowsPerBatch,
		Layout:          sink.Layout(cfg.Sink.Parquet.Partition),
		ChunkRows:       cfg.Sync.ChunkRows,
		SpoolDir:        cfg.Sync.SpoolDir,
		SafetyLag:       cfg.Sync.SafetyLag.D(),
		Lookback:        cfg.Sync.Lookback.D(),
		ReconcileEvery:  cfg.Sync.ReconcileEvery.D(),
		StateName:       StateWhere(cfg),
		OutputName:      OutputOf(cfg, ns),
		Now:             a.opts.Now,
		Logger:          log.Named("poller"),
		Gate:            a.gate,
		PlanGate:        a.planGate,
		Allocator:       a.alloc,
		Locks:           a.streamLocks,
	})
	return acct, nil
}

// claim claims the state of the account of namespace ns for one open
// account, and returns what gives that account's share back. The state
// holds one claim per namespace, while a reload opens a changed account
// again before the one it replaces has ended its passes and closed: the
// claim goes back to the state only when the last of them closes.
func (a *App) claim(ctx context.Context, c state.Claimer, ns string) (release func() error, err error) {
	a.claimMu.Lock()
	defer a.claimMu.Unlock()
	// A claim held already stays as it is, unless its lease was lost: it
	// is then claimed anew.
	if err := c.Claim(ctx, ns); err != nil {
		return nil, err
	}
	if a.claims == nil {
		a.claims = map[string]int{}
	}
	a.claims[ns]++
	return func() error {
		a.claimMu.Lock()
		defer a.claimMu.Unlock()
		if a.claims[ns]--; a.claims[ns] > 0 {
			return nil // the account that replaced this one writes on it
		}
		delete(a.claims, ns)
		return c.Release(ns)
	}, nil
}

// accountVersion identifies an account's settings and the secrets its
// sources read from outside the configuration (source.Credentialed), so
// that a reload reopens an account whose settings or mounted key changed.
func accountVersion(ac config.Account, sources []source.Source) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %v %v %v %v %v\x00", ac.Name, ac.BaseURL, ac.APIKeyFile, ac.Forms, ac.Tags, ac.Exclude, ac.Scheduling, ac.FormsOAuth)
	for _, src := range sources {
		c, ok := src.(source.Credentialed)
		if !ok {
			continue
		}
		key, err := c.Credential(ac)
		if err != nil {
			return "", err
		}
		h.Write([]byte(key))
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// Version identifies what the account was opened from.
func (acct *Account) Version() string { return acct.version }

// Current is the configuration last applied (Reload changes its
// accounts).
func (a *App) Current() *config.Config { return a.current.Load() }

// Account is the open account of that name, or nil.
func (a *App) Account(name string) *Account {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, acct := range a.Accounts {
		if acct.Name == name {
			return acct
		}
	}
	return nil
}

// Only is the one open account of a command that works on one (backfill,
// reconcile, adopt): the account --account names, or the only one.
func (a *App) Only() (*Account, error) {
	if len(a.Accounts) == 1 {
		return a.Accounts[0], nil
	}
	names := make([]string, 0, len(a.Accounts))
	for _, acct := range a.Accounts {
		names = append(names, acct.Name)
	}
	return nil, &AccountNeededError{Names: names}
}

// AccountNeededError is a command for one account run on a configuration
// of many without --account.
type AccountNeededError struct{ Names []string }

func (e *AccountNeededError) Error() string {
	return fmt.Sprintf("this command works on one account and the configuration has %d (%s): name one with --account", len(e.Names), strings.Join(e.Names, ", "))
}

// Drain stops every account's passes from starting new batches.
func (a *App) Drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
	for _, acct := range a.Accounts {
		acct.Poller.Drain()
	}
}

// Close releases everything App holds.
func (a *App) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, acct := range a.Accounts {
		errs = append(errs, acct.Close())
	}
	if a.Store != nil {
		errs = append(errs, a.Store.Close())
	}
	return errors.Join(errs...)
}

// Close releases the account's sink and its claim on the state; closing
// twice is closing once.
func (acct *Account) Close() error {
	acct.closeOnce.Do(func() {
		var errs []error
		if acct.Sink != nil {
			errs = append(errs, acct.Sink.Close())
		}
		if acct.release != nil {
			errs = append(errs, acct.release())
		}
		acct.closeErr = errors.Join(errs...)
		if acct.closed != nil {
			close(acct.closed)
		}
	})
	return acct.closeErr
}

// Closed is closed once the account is closed: its passes have ended.
func (acct *Account) Closed() <-chan struct{} { return acct.closed }

// hold takes n uses of the account: its daemon entries, or a pass a
// delivery triggered. It fails once the account is retired: a reload
// removed or replaced it, and it is closed or closing.
func (acct *Account) hold(n int) bool {
	acct.useMu.Lock()
	defer acct.useMu.Unlock()
	if acct.retired {
		return false
	}
	acct.uses += n
	return true
}

// drop ends a use of the account. The last use of an account a reload
// removed or replaced closes it: no pass of it runs any more.
func (acct *Account) drop() {
	acct.useMu.Lock()
	acct.uses--
	last := acct.uses == 0 && acct.app.Account(acct.Name) != acct
	if last {
		acct.retired = true
	}
	acct.useMu.Unlock()
	if !last {
		return
	}
	if err := acct.Close(); err != nil {
		acct.Log.Warn("closing the output of a removed account failed", zap.Error(err))
	}
}

// Hold takes a use of the account for work beside the daemon's entries (a
// backfill on request): a reload that replaces or removes the account
// closes it only once Drop ends the use. It is false for an account a
// reload retired.
func (acct *Account) Hold() bool { return acct.hold(1) }

// Drop ends a use Hold took.
func (acct *Account) Drop() { acct.drop() }

// HoldAccount is the open account of that name, held (Drop ends the
// hold), or nil.
func (a *App) HoldAccount(name string) *Account { return a.holdAccount(name) }

// holdAccount is the open account of that name, held for a pass (drop
// ends the hold), or nil.
func (a *App) holdAccount(name string) *Account {
	for {
		acct := a.Account(name)
		if acct == nil || acct.hold(1) {
			return acct
		}
		// Retired since the lookup: a reload replaced or removed it, so
		// the next lookup finds its successor, or nothing.
	}
}

// Jobs are the streams a full pass of the account's jobs source syncs
// (source.Jobs: the forms it lists, or every form it selects); none for
// an account that does not use it.
func (acct *Account) Jobs(ctx context.Context) ([]poller.Job, error) {
	if acct.jobs == nil {
		return nil, nil
	}
	return acct.jobs.Jobs(ctx)
}

// SyncAll runs one live pass over every job, at most concurrency streams
// at a time, all under the account's shared rate limit. One stream
// failing does not stop the others.
func (acct *Account) SyncAll(ctx context.Context, jobs []poller.Job, concurrency int) []poller.Result {
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
				results[i] = poller.Result{Account: acct.Name, Source: acct.jobsName, Stream: job.Stream, Err: fmt.Errorf("sync %s %s: %w", acct.jobsName, job.Stream, ctx.Err())}
				return
			}
			defer func() { <-sem }()
			if acct.Poller.Draining() {
				// Stopping: a stream not started yet is left for the next pass.
				results[i] = poller.Result{Account: acct.Name, Source: acct.jobsName, Stream: job.Stream, Interrupted: true}
				return
			}
			s, err := acct.Stream(job)
			switch {
			case err != nil:
				results[i] = poller.Result{Source: acct.jobsName, Stream: job.Stream, Err: err}
			case len(job.Recheck) > 0:
				results[i] = acct.Poller.SyncRecheck(ctx, s, job.Start, job.Recheck)
			default:
				results[i] = acct.Poller.Sync(ctx, s, job.Start)
			}
			results[i].Account = acct.Name
			if m, ok := acct.jobs.(source.MissingStream); ok {
				if se := source.AsError(results[i].Err); se != nil && se.Kind == source.NotFound && se.ID == job.Stream {
					results[i].Err = m.Missing(ctx, job.Stream, results[i].Err)
				}
			}
		}()
	}
	wg.Wait()
	return results
}

// Job is the job of one stream of the account's jobs source (a form): as
// configured, or with the defaults when the configuration does not name
// it.
func (acct *Account) Job(id string) poller.Job {
	if acct.jobs == nil {
		return poller.Job{Stream: id, Start: acct.app.Cfg.Sync.StartDate.Time}
	}
	return acct.jobs.Job(id)
}

// Check makes sure every id names a stream of the account's jobs source
// (a form), with the closest ids in the error (source.Selector): how a
// typo becomes an error before anything is written. An account whose
// source cannot tell checks nothing.
func (acct *Account) Check(ctx context.Context, ids []string) error {
	if sel, ok := acct.jobs.(source.Selector); ok {
		return sel.Check(ctx, ids)
	}
	return nil
}

// Pass is one live pass of every open account, each in its own goroutine:
// accounts wait on their own keys' rate limits, and the batches in flight
// across all of them are bounded by sync.max_batches.
func (a *App) Pass(ctx context.Context) []poller.Result {
	return ForEach(a.OpenAccounts(), func(acct *Account) []poller.Result { return acct.Pass(ctx, acct.Jobs, true) })
}

// Backfill loads [start, end) of every form of the account, one form after
// the other (they share the key), concurrency windows at once, then the
// streams of the other sources (sources.go); a form failing does not stop
// the others. With onBusy set (the
// daemon, on request) a stream whose scheduled pass is running is waited
// for (BackfillWaiting), and onBusy told; without, it fails with
// poller.ErrBusy.
func (acct *Account) Backfill(ctx context.Context, start, end time.Time, concurrency int, onBusy func(stream string)) []poller.Result {
	backfill := func(s poller.Stream, from time.Time, concurrency int) poller.Result {
		if onBusy == nil {
			return acct.Poller.Backfill(ctx, s, from, end, concurrency, nil)
		}
		return BackfillWaiting(ctx, acct.Poller, s, from, end, concurrency, nil, onBusy)
	}
	jobs, err := acct.Jobs(ctx)
	if err != nil {
		return []poller.Result{{Account: acct.Name, Source: acct.jobsName, Err: err}}
	}
	var results []poller.Result
	for _, job := range jobs {
		if acct.Poller.Draining() {
			results = append(results, poller.Result{Account: acct.Name, Source: acct.jobsName, Stream: job.Stream, Interrupted: true})
			continue
		}
		from := start
		if job.Start.After(from) {
			from = job.Start
		}
		s, err := acct.Stream(job)
		if err != nil {
			results = append(results, poller.Result{Account: acct.Name, Source: acct.jobsName, Stream: job.Stream, Err: err})
			continue
		}
		r := backfill(s, from, concurrency)
		r.Account = acct.Name
		results = append(results, r)
	}
	for _, src := range acct.sources {
		if acct.Poller.Draining() {
			break
		}
		results = append(results, acct.sourceBackfill(ctx, src, start, backfill)...)
	}
	return results
}

// Pass is one live pass over the streams of the jobs source that jobs
// lists (source.Jobs: the forms) and, when others is set, the streams of
// the account's other sources (sources.go): what `once` runs for each
// account, and each of `run`'s cron entries. A source failing never stops
// another: when listing the jobs fails, the result says so (Source set,
// Stream empty) and the other sources still sync.
func (acct *Account) Pass(ctx context.Context, jobs func(context.Context) ([]poller.Job, error), others bool) []poller.Result {
	var results []poller.Result
	var err error
	if s, ok := acct.jobs.(source.SignIn); ok {
		err = s.SignIn(ctx)
	}
	var list []poller.Job
	if err == nil {
		list, err = jobs(ctx)
	}
	if err != nil {
		acct.Log.Error("listing the account's "+acct.jobsName+" failed; none of them is synced in this pass, the other sources are", zap.String(logkey.Source, acct.jobsName), zap.Error(err))
		results = append(results, poller.Result{Account: acct.Name, Source: acct.jobsName, Err: err})
	}
	results = append(results, acct.SyncAll(ctx, list, acct.app.Cfg.Sync.Concurrency)...)
	if e, ok := acct.jobs.(source.Explainer); ok && acct.app.Cfg.MultiAccount() {
		for i := range results {
			results[i].Err = e.Explain(acct.Name, results[i].Err)
		}
	}
	if others {
		for _, src := range acct.sources {
			results = append(results, acct.sourcePass(ctx, src)...)
		}
	}
	return results
}

// Stream is the stream of a job of the account's jobs source (a form),
// read with the account's credentials of now; a *NoJobsError when the
// account does not use that source.
func (acct *Account) Stream(job poller.Job) (poller.Stream, error) {
	if acct.jobs == nil {
		return nil, &NoJobsError{Account: acct.Name, Stream: job.Stream}
	}
	return acct.jobs.JobStream(job), nil
}

// NoJobsError is a stream a command or a delivery names by id for an
// account whose sources have no streams chosen by id (no form: the
// account's settings open no Forms API client).
type NoJobsError struct{ Account, Stream string }

func (e *NoJobsError) Error() string {
	return fmt.Sprintf("account %s has no source that syncs %s: check the account's settings with `syncd validate`", e.Account, e.Stream)
}

// AdoptTargets are the streams `syncd state adopt` rebuilds: the forms of
// jobs and, when others is set, the streams of the account's other
// sources (sources.go).
func (acct *Account) AdoptTargets(ctx context.Context, jobs []poller.Job, others bool) ([]poller.AdoptTarget, error) {
	out := make([]poller.AdoptTarget, 0, len(jobs)+1)
	for _, j := range jobs {
		s, err := acct.Stream(j)
		if err != nil {
			return nil, err
		}
		out = append(out, poller.TargetOf(s))
	}
	if !others {
		return out, nil
	}
	for _, src := range acct.sources {
		streams, err := acct.sourceStreams(ctx, src)
		if err != nil {
			return nil, err
		}
		for _, s := range streams {
			out = append(out, poller.TargetOf(s.Stream))
		}
	}
	return out, nil
}

// DaemonEntries are the account's cron entries in `syncd run`: with no
// forms listed, one pass of every form of the account and the other
// sources' streams on sync.schedule; with forms listed, one entry per form
// on its own schedule (or sync.schedule), and the other sources' streams
// on sync.schedule. Entry ids carry
// the account's name, so a reload replaces one account's entries alone.
func (acct *Account) DaemonEntries() []daemon.Entry {
	cfg := acct.app.Cfg
	prefix := ""
	if cfg.MultiAccount() {
		prefix = "account " + acct.Name + ": "
	}
	// Each entry holds the account until the daemon is done with it (Close).
	entry := func(id, spec string, pass func(ctx context.Context) []poller.Result) daemon.Entry {
		return daemon.Entry{ID: acct.Name + "/" + id, Name: prefix + id, Schedule: spec, Version: acct.version + " " + spec, Pass: pass, Close: acct.drop}
	}
	if len(acct.Cfg.Forms) == 0 {
		return acct.held([]daemon.Entry{entry("sync.schedule", cfg.Sync.Schedule, acct.withWebhooks(acct.Jobs, true))})
	}
	entries := make([]daemon.Entry, 0, len(acct.Cfg.Forms)+1)
	for _, fc := range acct.Cfg.Forms {
		if slices.Contains(acct.Cfg.Exclude, fc.ID) {
			continue
		}
		job := acct.Job(fc.ID)
		spec := fc.Schedule
		if spec == "" {
			spec = cfg.Sync.Schedule
		}
		one := func(context.Context) ([]poller.Job, error) { return []poller.Job{job}, nil }
		entries = append(entries, entry("schedule of form "+fc.ID, spec, acct.withWebhooks(one, false)))
	}
	if len(acct.sources) > 0 {
		none := func(context.Context) ([]poller.Job, error) { return nil, nil }
		entries = append(entries, entry("sync.schedule", cfg.Sync.Schedule, acct.withWebhooks(none, true)))
	}
	return acct.held(entries)
}

// held is entries once each holds the account; none for a retired one.
func (acct *Account) held(entries []daemon.Entry) []daemon.Entry {
	if !acct.hold(len(entries)) {
		return nil
	}
	return entries
}

// DaemonEntries are the cron entries of every open account.
func (a *App) DaemonEntries() []daemon.Entry {
	var out []daemon.Entry
	// Not under a.mu: holding an account takes its useMu, under which its
	// last drop looks it up (a.mu).
	for _, acct := range a.OpenAccounts() {
		out = append(out, acct.DaemonEntries()...)
	}
	return out
}

// DaemonOptions are what `syncd run` runs: the entries, the server and
// what it serves.
//
// load, when not nil, reads the configuration again: a SIGHUP (hangup) or
// a change of the file (watch) reloads the accounts through it.
func (a *App) DaemonOptions(ctx context.Context, stopping <-chan struct{}, version string, load func() (*config.Config, error), hangup, watch <-chan struct{}) (daemon.Options, error) {
	opts := daemon.Options{
		Stopping: stopping, Version: version, Addr: a.Cfg.Server.Addr,
		UnreadyAfter: a.Cfg.Server.UnreadyAfter.D(), Jitter: a.Cfg.Sync.Jitter.D(), Grace: a.Cfg.Sync.ShutdownGrace.D(),
		Entries: a.DaemonEntries(), Status: status.Handler(StateWhere(a.Cfg), a.Store, func() func(string) bool { return StreamConfigured(a.Current()) }, func() func(string) (time.Time, bool) { return StreamStart(a.Current()) }, AccountsView(a.Current, a.Store), WebhooksView(a.Current, a.Store)), Metrics: a.Metrics, Log: a.Log,
		Hangup: hangup, Watch: watch,
	}
	opts.Reload = func(ctx context.Context) ([]daemon.Entry, error) {
		cfg := a.Current()
		if load != nil {
			var err error
			if cfg, err = load(); err != nil {
				return nil, err
			}
		}
		if err := a.Reload(ctx, cfg); err != nil {
			return nil, err
		}
		return a.DaemonEntries(), nil
	}
	h, err := a.ConnectHandler()
	if err != nil {
		return daemon.Options{}, err
	}
	opts.Handlers = map[string]http.Handler{}
	if h != nil {
		opts.Handlers[connect.PathConnect], opts.Handlers[connect.PathCallback] = h, h
	}
	if wh, stop := a.webhookHandler(ctx); wh != nil {
		opts.Handlers[webhook.PathPrefix], opts.Stop = wh, stop
	}
	return opts, nil
}

// Reload applies the accounts of cfg: an account whose settings or key
// changed is opened again, a new one is opened, and a removed one is no
// longer synced (its state and output stay; its sink closes when its last
// pass ends). Settings outside the accounts need a restart: a cfg that
// changes them is refused whole, and nothing changes.
func (a *App) Reload(ctx context.Context, cfg *config.Config) error {
	if diff := globalChange(a.Cfg, cfg); diff != "" {
		return fmt.Errorf("the new configuration changes %s, which takes a restart of syncd; nothing was reloaded (accounts are added, changed and removed without one)", diff)
	}
	a.mu.RLock()
	old := map[string]*Account{}
	for _, acct := range a.Accounts {
		old[acct.Name] = acct
	}
	a.mu.RUnlock()
	next := make([]*Account, 0, len(cfg.AccountList()))
	var opened []*Account
	for _, ac := range ShardAccounts(cfg.AccountList(), a.opts.Shard) {
		if a.shared && !a.owned(ac.Name) {
			continue
		}
		if acct, ok := old[ac.Name]; ok {
			if v, err := accountVersion(ac, a.sources); err == nil && v == acct.version {
				next = append(next, acct)
				continue
			}
		}
		acct, err := a.OpenAccount(ctx, ac)
		if err != nil {
			for _, o := range opened {
				o.Close()
			}
			return fmt.Errorf("open account %s: %w; nothing was reloaded", ac.Name, err)
		}
		opened = append(opened, acct)
		next = append(next, acct)
	}
	a.mu.Lock()
	if a.draining {
		for _, acct := range opened {
			acct.Poller.Drain()
		}
	}
	a.Accounts = next
	a.mu.Unlock()
	a.current.Store(cfg)
	a.Log.Info("accounts reloaded", zap.Int(logkey.Accounts, len(next)), zap.Int(logkey.Opened, len(opened)))
	return nil
}

// globalChange names what differs between two configurations outside the
// accounts (and the single account's key, base URL and forms), or "".
func globalChange(a, b *config.Config) string {
	strip := func(c *config.Config) map[string]any {
		cp := *c
		cp.Accounts, cp.Forms = nil, nil
		cp.Source.APIKey, cp.Source.BaseURL = "", ""
		m, err := cp.EffectiveMap()
		if err != nil {
			return nil
		}
		return m
	}
	var diffs []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		mx, okx := x.(map[string]any)
		my, oky := y.(map[string]any)
		if !okx || !oky {
			if !reflect.DeepEqual(x, y) {
				diffs = append(diffs, path)
			}
			return
		}
		keys := map[string]bool{}
		for k := range mx {
			keys[k] = true
		}
		for k := range my {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(p, mx[k], my[k])
		}
	}
	walk("", strip(a), strip(b))
	sort.Strings(diffs)
	return strings.Join(diffs, ", ")
}

// owned reports whether this replica owns the account (shared state).
func (a *App) owned(name string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.owns[name]
}

// SetOwned sets the accounts this replica of a shared state owns: the next
// Reload opens those it does not have open and closes the others.
func (a *App) SetOwned(names []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.owns = map[string]bool{}
	for _, n := range names {
		a.owns[n] = true
	}
}
