package poller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// window is a planned half-open range bounded by its row count, with the
// count the service gave for it when it was planned (-1 when unknown).
type window struct {
	start, end time.Time
	count      int
	atMost     int // Window.AtMost
	// first is what planning already read of the window (Window.First).
	first any
	// planSlot: the window holds a slot of Options.PlanGate (taken before
	// it was planned), given back when its batch is done.
	planSlot bool
	// An open batch of an earlier run: its table (when it differs from the
	// form's), its id and partitions as its intent recorded them, and a
	// failure keeps its intent, since that run's commit may still land.
	redo  bool
	table string
	id    string
	parts []string
	// reconcile: a batch of changes found by re-reading a committed window;
	// seen is when that reconcile pass began (tombstones' version time).
	reconcile bool
	seen      time.Time
	attempt   string // the attempt that wrote the open batch's files
}

// streamRun is one pass over one stream: every stream runs through its
// prepare, recovery, intents, spool, commits and guards.
type streamRun struct {
	p        *Poller
	s        Stream
	key      string // the stream's key: its state record, its batch ids
	log      *zap.Logger
	progress func(Progress)

	table     string
	gen       int // the form's generation, carried by its batch ids
	recovered int
	rows      atomic.Int64
	bytes     atomic.Int64
	batches   atomic.Int64
	misfits   atomic.Int64
	discarded atomic.Int64
	expected  int64

	// schemaMu guards the pinned schema, which every window of the pass
	// extends, and orders the state commits that pin it.
	schemaMu    sync.Mutex
	pinned      table.Schema
	metaFetched bool

	// layout is the table's partition layout (resolveLayout, decideLayout).
	layoutMu sync.Mutex
	layout   sink.Layout

	// interrupted: Drain stopped planning before the range was done.
	interrupted atomic.Bool
	// What reconciles did in this pass.
	reconciling                             bool
	reconciledWindows, versions, tombstones atomic.Int64
	// indexFrom: where a scheduled reconcile starts re-reading (now -
	// sync.lookback); zero: sync.lookback is 0.
	indexFrom time.Time
	// rechecked: per window of a SyncRecheck, whether the pass committed it.
	rechecked []bool
}

// recordError keeps the pass's error in the form's state, for `state
// show` and `syncd accounts`; a form the state holds no record of (a
// typo, a form whose passes failed before they wrote anything) is not
// added for it. A pass writes its form's record before its first commit
// (the version index starts then), so a form failing from its first pass
// on is recorded failing.
func (f *streamRun) recordError(ctx context.Context, err error) {
	st, gerr := f.p.store.Get(ctx, f.key)
	if gerr != nil || st.UpdatedAt.IsZero() {
		return
	}
	if serr := f.p.store.SetError(ctx, f.key, err.Error()); serr != nil {
		f.log.Warn("could not record the error in the state store", zap.Error(serr))
	}
}

// prepare readies a pass over the form: it finishes a refresh a stop left
// half done, refuses a state committed past now, resolves the batches an
// earlier run left open (fetching again those the sink lacks) and loads the
// pinned schema. It returns the state after all that.
func (f *streamRun) prepare(ctx context.Context) (state.StreamState, error) {
	store := f.p.store
	st, err := store.Get(ctx, f.key)
	if err != nil {
		return st, fmt.Errorf("read state of form %s: %w", f.key, err)
	}
	f.table = f.s.Table()
	if st.Refresh != nil {
		// A refresh stopped part-way: finish removing the old output before
		// anything new is written, or old and new rows would mix.
		if st, err = f.p.finishRefresh(ctx, f.key, st); err != nil {
			return st, err
		}
	}
	if end := st.Committed.End(); end.After(f.p.opts.Now()) {
		return st, &FutureCommitError{Stream: f.key, End: end, LastSuccess: st.LastSuccess}
	}
	if err := f.p.checkOwnOutput(ctx, f.key, f.table, st); err != nil {
		return st, err
	}
	f.gen = st.Generation
	if err := f.resolveLayout(ctx, st); err != nil {
		return st, err
	}
	redo, err := f.recoverIntents(ctx, st)
	if err != nil {
		return st, err
	}
	if st, err = store.Get(ctx, f.key); err != nil {
		return st, fmt.Errorf("read state of form %s: %w", f.key, err)
	}
	if ev, ok := f.s.(Evolver); ok && len(st.Schema) > 0 {
		if f.pinned, err = ev.Unpin(st.Schema); err != nil {
			return st, fmt.Errorf("read the pinned schema of %s from the state store: %w", f.key, err)
		}
	}
	for _, w := range redo {
		if w.reconcile {
			err = f.reconcileWindow(ctx, w, w.seen)
		} else {
			err = f.processWindow(ctx, w)
		}
		if err != nil {
			return st, fmt.Errorf("finish the open batch of form %s left by an earlier run: %w", f.key, err)
		}
	}
	if len(redo) > 0 {
		if st, err = store.Get(ctx, f.key); err != nil {
			return st, fmt.Errorf("read state of form %s: %w", f.key, err)
		}
	}
	return st, nil
}

// epoch stands for "the beginning of the form's history": no afterDate is sent.
var epoch = time.Unix(0, 0).UTC()

func (f *streamRun) execute(ctx context.Context, from, to time.Time, concurrency int) error {
	st, err := f.prepare(ctx)
	if err != nil {
		return err
	}
	// The version index starts before this pass writes: what was committed
	// before it existed is not in it.
	if err := f.startIndex(ctx, st); err != nil {
		return err
	}
	if from.Before(epoch) || from.IsZero() {
		from = epoch
	}
	from, to = floorMS(from), floorMS(to)
	if !from.Before(to) {
		return nil
	}
	gaps := st.Committed.Gaps(state.Interval{Start: from, End: to})
	if len(gaps) == 0 {
		f.report(Progress{CoveredBefore: true})
		return nil
	}
	if c, ok := f.s.(Counter); ok && f.progress != nil {
		// One request tells how much the run has to do, for the ETA.
		for _, g := range gaps {
			n, err := c.Count(ctx, g.Start, g.End)
			if err != nil {
				return fmt.Errorf("count %s in [%s, %s): %w", f.key, g.Start.Format(time.RFC3339), g.End.Format(time.RFC3339), err)
			}
			f.expected += int64(n)
		}
		f.report(Progress{})
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	windows := make(chan window)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	for i := 0; i < concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range windows {
				if err := f.processWindow(ctx, w); err != nil {
					fail(err)
				}
			}
		}()
	}
	// held: the planner holds a PlanGate slot, taken before it plans a
	// gap. The first window it emits takes the slot along when it carries
	// a page planning read; otherwise the slot is given back there, so
	// that a planner never holds one while it waits for this stream's
	// workers (which may be waiting for Gate slots).
	planGate, held := f.p.opts.PlanGate, false
	letGo := func() {
		if held {
			planGate.Release(1)
			held = false
		}
	}
	emit := func(pw Window) error {
		carry := held && pw.First != nil
		if !carry {
			letGo()
		}
		select {
		case <-f.p.draining:
			return errDraining
		default:
		}
		if pw.Empty {
			return f.commitEmpty(ctx, pw.Start, pw.End)
		}
		f.noteWindow(pw)
		select {
		case windows <- window{start: pw.Start, end: pw.End, count: pw.Count, atMost: pw.AtMost, first: pw.First, planSlot: carry}:
			if carry {
				held = false // the window's batch gives it back
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-f.p.draining:
			return errDraining
		}
	}
	for _, g := range gaps {
		if planGate != nil {
			if err := planGate.Acquire(ctx, 1); err != nil {
				fail(fmt.Errorf("wait for a slot to plan %s: %w", f.key, err))
				break
			}
			held = true
		}
		err := f.p.plan(ctx, f.s, g, f.cutter(), emit)
		letGo()
		if err != nil {
			if errors.Is(err, errDraining) {
				f.interrupted.Store(true)
			} else {
				fail(err)
			}
			break
		}
	}
	close(windows)
	wg.Wait()
	return firstErr
}

// DefaultTable is the table a form is written to when the config names none.
func DefaultTable(formID string) string {
	return "form_" + table.SanitizeName(formID)
}

func (f *streamRun) report(p Progress) {
	if f.progress == nil {
		return
	}
	p.Rows = f.rows.Load()
	p.ExpectedRows = f.expected
	p.Windows = int(f.batches.Load())
	f.progress(p)
}

// recoverIntents resolves the batches a stopped run left open. One the sink
// holds is committed in the state. One it does not is returned, to be
// fetched again under the same batch id before anything else: never dropped
// and re-planned, because a commit the stopped run had already sent may
// still land (a BigQuery load job inserted just before a kill), and only the
// same batch id lets the sink tell the two apart.
func (f *streamRun) recoverIntents(ctx context.Context, st state.StreamState) ([]window, error) {
	redo, recovered, err := f.p.recoverIntents(ctx, st, f.log, f.batchFor, f.pinWith)
	f.recovered += recovered
	return redo, err
}

// pinWith is the pinned schema (raw, as the state holds it; nil: none)
// merged with a batch's built one: what a recovered batch pins. A stream
// with a fixed table pins nothing.
func (f *streamRun) pinWith(pinned, built []byte) ([]byte, error) {
	ev, ok := f.s.(Evolver)
	if !ok {
		return nil, nil
	}
	b, err := ev.Unpin(built)
	if err != nil {
		return nil, err
	}
	if len(pinned) > 0 {
		cur, err := ev.Unpin(pinned)
		if err != nil {
			return nil, err
		}
		b = cur.Merge(b)
	}
	return b.Marshal()
}

// recoverIntents resolves the open batches of one stream's state: those the
// sink holds are committed in the state, the others returned to be fetched
// again under their own ids.
func (p *Poller) recoverIntents(ctx context.Context, st state.StreamState, log *zap.Logger, batchFor func(window) sink.Batch, pinWith func(pinned, built []byte) ([]byte, error)) (redo []window, recovered int, err error) {
	ids := make([]string, 0, len(st.Intents))
	for id := range st.Intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		in := st.Intents[id]
		w := window{start: in.Start, end: in.End, count: -1, redo: true, table: in.Table, id: id, parts: in.Parts, attempt: in.Attempt, reconcile: in.Reconcile, seen: in.CreatedAt}
		done, err := p.sink.Committed(ctx, batchFor(w))
		if err != nil {
			return nil, recovered, fmt.Errorf("resolve open batch %s of %s: ask the sink: %w", id, st.Key, err)
		}
		if !done {
			log.Info("an open batch never reached the sink; fetching its window again under the same batch id", zap.String(logkey.BatchID, id))
			redo = append(redo, w)
			continue
		}
		// The commit applies the index change the intent recorded, and pins
		// the columns the batch's files hold.
		c := state.Commit{BatchID: id, Window: state.Interval{Start: in.Start, End: in.End}, Rows: in.Rows, Layout: in.Layout}
		if len(in.Schema) > 0 {
			cur, gerr := p.store.Get(ctx, st.Key)
			if gerr != nil {
				return nil, recovered, fmt.Errorf("resolve open batch %s of %s: %w", id, st.Key, gerr)
			}
			if c.Schema, err = pinWith(cur.Schema, in.Schema); err != nil {
				return nil, recovered, fmt.Errorf("resolve open batch %s of %s: the schema its files were built with: %w", id, st.Key, err)
			}
		}
		if in.Reconcile {
			c.Reconcile = &state.ReconcileCounts{}
			if in.Counts != nil {
				*c.Reconcile = *in.Counts
			}
		}
		err = p.store.Commit(ctx, st.Key, c)
		if err != nil {
			return nil, recovered, fmt.Errorf("resolve open batch %s of %s: %w", id, st.Key, err)
		}
		log.Info("recovered a batch committed before a stop", zap.String(logkey.BatchID, id))
		recovered++
	}
	return redo, recovered, nil
}

func (f *streamRun) batchFor(w window) sink.Batch {
	table := f.table
	if w.table != "" {
		table = w.table
	}
	id := w.id
	if id == "" {
		id = BatchID(f.key, w.start, w.end)
		if f.gen > 0 {
			id += fmt.Sprintf("-g%d", f.gen)
		}
	}
	cols := f.s.Columns()
	layout := f.currentLayout()
	if f.p.parted && layout == "" {
		// A batch no planning chose for (a reconcile of a table that
		// never had a batch): its own window chooses.
		layout = f.decideLayout(w.start, w.end, max(w.count, w.atMost))
	}
	b := sink.Batch{
		ID:            id,
		Stream:        f.key,
		Table:         table,
		WindowStart:   w.start,
		WindowEnd:     w.end,
		TimeColumn:    cols.Time,
		KeyColumn:     cols.Key,
		VersionColumn: cols.Version,
		Required:      cols.Required,
		Parts:         w.parts,
		Attempt:       w.attempt,
		Layout:        layout,
	}
	if d, ok := f.s.(Describer); ok {
		b.Description = d.Description()
	}
	return b
}

// commitEmpty records a range the service says holds no submission.
func (f *streamRun) commitEmpty(ctx context.Context, start, end time.Time) error {
	if !start.Before(end) {
		return nil
	}
	if err := f.p.checkHorizon(f.key, end); err != nil {
		return err
	}
	if err := f.p.store.Commit(ctx, f.key, state.Commit{Window: state.Interval{Start: start, End: end}, Layout: string(f.currentLayout())}); err != nil {
		return fmt.Errorf("record empty range of form %s: %w", f.key, err)
	}
	return nil
}

// cutter is what the stream's windows are cut with: the batch bound, and
// a split at the start of the table's partitions, whose layout a new
// table chooses at its first split, from the gap's count and first record.
func (f *streamRun) cutter() Cutter {
	return Cutter{MaxRows: f.p.opts.MaxRowsPerBatch, Split: func(a, lo, b time.Time, total int, count func(t time.Time) (int, error)) (time.Time, int, error) {
		l := f.currentLayout()
		if l == "" {
			l = f.decideLayout(lo, b, total)
		}
		return f.p.split(l, a, lo, b, total, count)
	}}
}

// plan cuts the gap into the windows of the stream: its own Planner's, or
// by its counts. A stream that can neither plan nor count is read as one
// window per gap.
func (p *Poller) plan(ctx context.Context, s Stream, gap state.Interval, cut Cutter, emit func(Window) error) error {
	if pl, ok := s.(Planner); ok {
		return pl.Plan(ctx, gap, cut, emit)
	}
	c, ok := s.(Counter)
	if !ok {
		return emit(Window{Start: gap.Start, End: gap.End, Count: -1})
	}
	for a, b := gap.Start, gap.End; a.Before(b); {
		n, err := c.Count(ctx, a, b)
		if err != nil {
			return fmt.Errorf("count %s in [%s, %s): %w", s.Key(), a.Format(time.RFC3339), b.Format(time.RFC3339), err)
		}
		end := b
		if n > cut.MaxRows {
			if end, n, err = cut.Split(a, a, b, n, func(t time.Time) (int, error) { return c.Count(ctx, a, t) }); err != nil {
				return fmt.Errorf("count %s: %w", s.Key(), err)
			}
		}
		// An empty count is read, not trusted: a count may miss records
		// (bookings never updated count by another field).
		if err := emit(cut.Window(a, end, n)); err != nil {
			return err
		}
		a = end
	}
	return nil
}

// split picks the end of the first window of [a, b), which counts total >
// MaxRowsPerBatch records, none before lo: an instant whose window [a, t)
// counts (with count) between half and all of a batch, found by
// interpolating on counts (records are seldom spread evenly), then moved
// back to the start of its partition in layout ("": none) when that is
// still inside the window (the window's count is then -1, unknown). A
// single millisecond holding more than a batch is taken whole.
func (p *Poller) split(layout sink.Layout, a, lo, b time.Time, total int, count func(t time.Time) (int, error)) (time.Time, int, error) {
	maxRows := p.opts.MaxRowsPerBatch
	target := max(maxRows*9/10, 1)
	loN, hi, hiN := 0, b, total
	for i := 0; ; i++ {
		if hi.Sub(lo) <= time.Millisecond {
			if loN == 0 {
				return hi, hiN, nil // one millisecond over a batch: take it whole
			}
			break
		}
		var t time.Time
		if i < 8 && hiN > loN {
			t = floorMS(lo.Add(time.Duration(float64(hi.Sub(lo)) * float64(target-loN) / float64(hiN-loN))))
		}
		if !t.After(lo) || !t.Before(hi) {
			t = midpoint(lo, hi)
		}
		n, err := count(t)
		if err != nil {
			return time.Time{}, 0, err
		}
		if n <= maxRows && n >= target/2 {
			lo, loN = t, n
			break
		}
		if n > maxRows {
			hi, hiN = t, n
		} else {
			lo, loN = t, n
		}
	}
	if layout != "" && layout != sink.LayoutNone {
		if s := floorMS(layout.PartitionStart(lo)); s.After(a) && s.Before(lo) {
			return s, -1, nil
		}
	}
	return lo, loN, nil
}
