// Package poller turns a form's record of committed windows into half-open
// time windows, fetches each window whole, and commits it through the sink
// and the state store in the order that makes a crash at any instant leave
// neither a gap nor a duplicate: intent, fetch, commit, checkpoint.
package poller

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/semaphore"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/arrowpool"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// Options tune the poller; zero values take the documented defaults.
type Options struct {
	MaxRowsPerBatch int           // a window that counts more is split in time (default 50,000)
	SafetyLag       time.Duration // the live sync stops at now - SafetyLag (default 2m)
	// Lookback is how far back the scheduled reconcile re-reads committed
	// windows (0: no scheduled reconcile; the version index covers the
	// whole history either way); ReconcileEvery how often a live pass
	// reconciles a form (0: every pass).
	Lookback       time.Duration
	ReconcileEvery time.Duration
	// ChunkRows bounds the rows of a window held in memory: past it a
	// window's rows go to a spool in SpoolDir (default 4096; "" is the
	// system's temporary folder).
	ChunkRows int
	SpoolDir  string
	// StateName and OutputName say where the state and the output are, in
	// messages (ForeignOutputError).
	StateName, OutputName string
	Now                   func() time.Time
	Logger                *zap.Logger
	// Allocator is the memory of the batches' Arrow data; nil is an
	// arrowpool.Pool (poisoned in test binaries).
	Allocator memory.Allocator
	// Gate, when set, bounds the batches in flight across every poller
	// that shares it (one per account): each batch waits for a slot and
	// gives it back when it commits. Waiters are served in order, so an
	// account backfilling millions of rows takes a slot per batch and
	// queues again behind the other accounts' incremental passes.
	Gate *semaphore.Weighted
	// PlanGate, when set, bounds the planned windows that hold what
	// planning read (a form's first page, decoded) across every poller
	// that shares it: a stream takes a slot before it plans a gap and
	// keeps it, with the page, until that window's batch is done. Without
	// it every stream of every account plans at once and holds its page
	// while its batch waits for a Gate slot: a first sync of many
	// accounts then grew by about 3 MB per account, whatever Gate allowed.
	PlanGate *semaphore.Weighted
	// Layout is the partition layout of a new table (a sink.Partitioner's):
	// "" (or sink.LayoutAuto) lets each table's density choose its own at
	// its first batch (sink.ChooseLayout, for partitions of LayoutTarget
	// rows: default MaxRowsPerBatch, a full batch); a layout applies to
	// every new table. A table keeps the layout it was first written with
	// (state.StreamState.Layout); one that another layout is asked of is
	// refused (LayoutError).
	Layout       sink.Layout
	LayoutTarget int
	// Locks keep two passes of one stream apart. Pollers that share them
	// never run a stream twice at once: a reload opens a changed account
	// (and its poller) again while the one it replaces may still be in a
	// pass of the same streams. Nil: the poller's own.
	Locks *StreamLocks
}

// StreamLocks are the locks of streams by key, one pass at a time each.
// The zero value is not usable: use NewStreamLocks.
type StreamLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

// NewStreamLocks returns an empty set of stream locks.
func NewStreamLocks() *StreamLocks { return &StreamLocks{m: map[string]*sync.Mutex{}} }

// of is the lock of the stream of key.
func (l *StreamLocks) of(key string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.m[key]
	if !ok {
		m = &sync.Mutex{}
		l.m[key] = m
	}
	return m
}

func (o *Options) setDefaults() {
	if o.MaxRowsPerBatch <= 0 {
		o.MaxRowsPerBatch = 50000
	}
	if o.SafetyLag < 0 {
		o.SafetyLag = 0
	}
	if o.ChunkRows <= 0 {
		o.ChunkRows = 4096
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Allocator == nil {
		o.Allocator = arrowpool.ForProcess(false)
	}
	if o.Locks == nil {
		o.Locks = NewStreamLocks()
	}
	if o.Layout == sink.LayoutAuto {
		o.Layout = ""
	}
	if o.LayoutTarget <= 0 {
		o.LayoutTarget = o.MaxRowsPerBatch
	}
}

// Job is one form to sync, as the configuration names it (the app makes
// it a stream).
type Job struct {
	Stream string
	Table  string    // destination table; empty: derived from the form id
	Start  time.Time // the earliest submission time to sync; zero: the form's whole history
	// Recheck are windows of submission time that webhook deliveries
	// announced: a pass re-reads what of them was committed before it (a
	// submission imported behind the checkpoint), see SyncRecheck.
	Recheck []state.Interval
}

// Poller is the engine: it syncs streams into a Sink, recording progress
// in a Store.
type Poller struct {
	sink  sink.Sink
	store state.Store
	opts  Options
	// parted: the sink writes a file per partition (a sink.Partitioner),
	// in each table's layout; false for a sink that takes a batch as one
	// unit.
	parted bool

	mu          sync.Mutex
	loggedTypes map[string]bool // "form/type" of unknown types already logged

	draining  chan struct{} // closed by Drain: plan no new window
	drainOnce sync.Once

	// streamSlot lets one spooled batch at a time be written: each holds a
	// row group and its column writers in memory, so whatever the number of
	// windows in flight, memory holds one of them.
	streamSlot chan struct{}
}

// New returns a Poller.
func New(snk sink.Sink, store state.Store, opts Options) *Poller {
	opts.setDefaults()
	p := &Poller{
		sink:        snk,
		store:       store,
		opts:        opts,
		loggedTypes: map[string]bool{},
		draining:    make(chan struct{}),
		streamSlot:  make(chan struct{}, 1),
	}
	_, p.parted = snk.(sink.Partitioner)
	return p
}

// Drain makes every pass stop planning new windows; windows already being
// fetched go on to commit unless their context is cancelled. It is how a
// SIGTERM lets the batch in flight finish.
func (p *Poller) Drain() { p.drainOnce.Do(func() { close(p.draining) }) }

// errDraining ends planning early when Drain was called; it is not a failure.
var errDraining = errors.New("draining")

// SourceForms is the source of the forms' streams, whose keys are form ids.
const SourceForms = "forms"

// Result summarises one pass over one stream: a form, or another source's
// stream. A result with Source set and FormID empty is the failure of the
// source itself (listing the account's forms), before any stream of it ran.
type Result struct {
	// Account names the account the stream belongs to ("default" for a
	// configuration of one account); set by the caller that runs the pass.
	Account      string        `json:"account,omitempty"`
	Source       string        `json:"source"`
	Stream       string        `json:"form_id"` // the stream: a form id, or scheduling/bookings
	Table        string        `json:"table"`
	Rows         int64         `json:"rows"`
	Bytes        int64         `json:"bytes"`
	Batches      int           `json:"batches"`
	Requests     int64         `json:"requests"`
	Misfits      int64         `json:"misfits"`
	Discarded    int64         `json:"discarded"`
	Duration     time.Duration `json:"duration_ns"`
	CoveredStart time.Time     `json:"covered_start,omitempty"`
	CoveredEnd   time.Time     `json:"covered_end,omitempty"`
	Recovered    int           `json:"recovered_intents"`
	// Interrupted is set when Drain stopped the pass before it had planned
	// the whole range: what it committed stays committed, the rest comes
	// with the next pass. It is not a success.
	Interrupted bool `json:"interrupted"`
	// ClampedTo is set when the range asked for ended past now - safety
	// lag and was cut there: nothing is ever committed past it.
	ClampedTo time.Time `json:"clamped_to,omitzero"`
	// What a reconcile in this pass did: windows read again, version rows
	// (edits and late imports) and tombstones (deletions) written.
	Reconciled        bool  `json:"reconciled"`
	ReconciledWindows int64 `json:"reconciled_windows"`
	Versions          int64 `json:"versions"`
	Tombstones        int64 `json:"tombstones"`
	// Rechecked says, for each window a SyncRecheck was given, whether the
	// pass left it committed as the API lists it now: read by this pass,
	// new or again.
	Rechecked []bool `json:"-"`
	// Maintained is set when the sink maintained the stream's table after
	// the pass (a sink.Maintainer); MaintainErr when that failed (the
	// pass's rows are committed all the same).
	Maintained  bool  `json:"maintained"`
	MaintainErr error `json:"-"`
	Err         error `json:"-"`
}

// ErrBusy is returned when a pass of the same form is already running.
var ErrBusy = errors.New("a pass of this form is already running")

// Sync runs the live pass of one stream: every gap in [start, now - lag),
// then, for a Reconciler whose reconcile is due, the reconcile of the
// lookback.
func (p *Poller) Sync(ctx context.Context, s Stream, start time.Time) Result {
	return p.run(ctx, s, start, p.Horizon(), 1, nil, nil)
}

// SyncRecheck is Sync, which then re-reads the parts of recheck that were
// committed before the pass, through the reconcile (a late import is a new
// row, an edit a version, each once): a webhook delivery announced a
// record there, and an incremental pass never reads behind the
// checkpoint. Result.Rechecked says which windows the pass committed.
func (p *Poller) SyncRecheck(ctx context.Context, s Stream, start time.Time, recheck []state.Interval) Result {
	return p.run(ctx, s, start, p.Horizon(), 1, nil, recheck)
}

// Horizon is now - safety lag, to the millisecond: the latest instant any
// pass may commit. Submissions may still appear with earlier times until
// the lag has passed, so committing past it would skip them for good.
func (p *Poller) Horizon() time.Time {
	return floorMS(p.opts.Now().Add(-p.opts.SafetyLag))
}

// Draining reports whether Drain was called.
func (p *Poller) Draining() bool {
	select {
	case <-p.draining:
		return true
	default:
		return false
	}
}

// Progress reports a backfill's advance.
type Progress struct {
	Rows          int64 // rows committed so far in this run
	ExpectedRows  int64 // rows the range held when the run started (an estimate)
	Windows       int   // windows committed so far
	CoveredBefore bool  // the whole range was already committed
}

// Backfill loads [from, to) of one form with windows fetched concurrently. It
// fills only the gaps of the same record the live sync uses, so no range is
// written twice whichever runs first, and a rerun resumes where it stopped.
func (p *Poller) Backfill(ctx context.Context, s Stream, from, to time.Time, concurrency int, progress func(Progress)) Result {
	if concurrency < 1 {
		concurrency = 1
	}
	return p.run(ctx, s, from, to, concurrency, progress, nil)
}

func (p *Poller) formLock(formID string) *sync.Mutex { return p.opts.Locks.of(formID) }

func (p *Poller) run(ctx context.Context, s Stream, from, to time.Time, concurrency int, progress func(Progress), recheck []state.Interval) Result {
	var clamped time.Time
	if h := p.Horizon(); to.After(h) {
		to, clamped = h, h
	}
	res := p.pass(ctx, s, func(f *streamRun) error {
		f.progress = progress
		var before state.Intervals
		if len(recheck) > 0 {
			// What was committed before this pass: the part of recheck the
			// pass itself commits now needs no second read.
			st, err := p.store.Get(ctx, f.key)
			if err != nil {
				return fmt.Errorf("read state of %s: %w", f.key, err)
			}
			before = st.Committed
		}
		if err := f.execute(ctx, from, to, concurrency); err != nil {
			return err
		}
		if len(recheck) > 0 {
			if err := f.recheck(ctx, before, recheck, to); err != nil {
				return err
			}
		}
		st, err := p.store.Get(ctx, f.key)
		if err != nil {
			return fmt.Errorf("read state of %s: %w", f.key, err)
		}
		// The live pass also reconciles the lookback when it is due; a
		// backfill (a progress reporter) never does.
		if progress == nil && !f.interrupted.Load() && f.reconcileDue(st) {
			f.reconciling = true
			return f.reconcile(ctx, time.Time{}, to, false)
		}
		return nil
	})
	res.ClampedTo = clamped
	return res
}

// pass runs body over one stream under the stream's lock and sums it up.
func (p *Poller) pass(ctx context.Context, s Stream, body func(f *streamRun) error) Result {
	started := p.opts.Now()
	key := s.Key()
	res := Result{Source: Source(s), Stream: key, Table: s.Table()}
	lock := p.formLock(key)
	if !lock.TryLock() {
		res.Err = fmt.Errorf("sync %s: %w", key, ErrBusy)
		return res
	}
	defer lock.Unlock()

	requests := s.Requests()
	f := &streamRun{p: p, s: s, key: key, log: p.opts.Logger.With(zap.String(logkey.Stream, key))}
	if p.opts.Lookback > 0 {
		f.indexFrom = floorMS(p.opts.Now().Add(-p.opts.Lookback))
	}
	err := body(f)
	res.Interrupted = f.interrupted.Load()
	if f.table != "" {
		res.Table = f.table
	}
	res.Rows = f.rows.Load()
	res.Bytes = f.bytes.Load()
	res.Batches = int(f.batches.Load())
	res.Misfits = f.misfits.Load()
	res.Discarded = f.discarded.Load()
	res.Recovered = f.recovered
	res.Requests = s.Requests() - requests
	res.Reconciled = f.reconciling
	res.ReconciledWindows, res.Versions, res.Tombstones = f.reconciledWindows.Load(), f.versions.Load(), f.tombstones.Load()
	res.Rechecked = f.rechecked
	res.Duration = p.opts.Now().Sub(started)
	if st, gerr := p.store.Get(context.WithoutCancel(ctx), key); gerr == nil && len(st.Committed) > 0 {
		res.CoveredStart = st.Committed[0].Start
		res.CoveredEnd = st.Committed[len(st.Committed)-1].End
	}
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Stopped (SIGINT, SIGTERM, the end of the shutdown grace): an
		// interrupted pass, not a failure of the stream. Its last error
		// and last success stay as they were.
		res.Interrupted = true
	case err != nil:
		res.Err = err
		f.recordError(context.WithoutCancel(ctx), err)
	case !res.Interrupted:
		// Only a pass that ended well is a success: one that committed an
		// empty range and then failed, or was stopped, is not.
		if serr := p.store.SetSucceeded(context.WithoutCancel(ctx), key, p.opts.Now()); serr != nil {
			res.Err = fmt.Errorf("record the success of the pass of %s: %w", key, serr)
		}
		res.Maintained, res.MaintainErr = p.maintain(ctx, f, res.Table)
	}
	return res
}

// maintain lets a sink that keeps tables well-sized (a sink.Maintainer)
// maintain the stream's table when it is due: here, under the stream's
// lock, never beside the stream's own commits. A failure is logged, not
// the pass's: its rows are committed, and the next pass tries again.
func (p *Poller) maintain(ctx context.Context, f *streamRun, table string) (bool, error) {
	m, ok := p.sink.(sink.Maintainer)
	if !ok || table == "" || ctx.Err() != nil {
		return false, nil
	}
	done, err := m.MaintainIfDue(ctx, table)
	if err != nil && ctx.Err() == nil {
		f.log.Warn("table maintenance failed; the next pass tries again", zap.String(logkey.Table, table), zap.Error(err))
		return true, err
	}
	return done, nil
}
