package poller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// The reconcile finds what changed in windows already committed: the API
// has no "updated after" filter, and nothing signals a deletion, so the
// only way to see an edit, a deletion or a submission imported with a past
// submissionTime is to read the window again. A reconcile reads every page
// of the committed windows from where it starts (sync.lookback for the
// scheduled one; any date for `syncd reconcile --from`), with no count
// request: the version index says how the windows are cut, and compares
// each submission with the version index: a new lastUpdatedAt is an edit, an
// id the index lacks a late import, an id the index has and the API no
// longer lists a deletion. Only a window with changes costs a batch: its
// changed rows and tombstones, committed by the same intent, commit and
// checkpoint protocol, so each version lands exactly once. A reconcile with
// nothing changed costs one request per 149 submissions of the lookback.

// ErrNoIndex means a reconcile was asked for a range the version index
// does not cover.
type ErrNoIndex struct {
	Stream      string
	From        time.Time
	IndexedFrom time.Time
}

func (e *ErrNoIndex) Error() string {
	if e.IndexedFrom.IsZero() {
		return fmt.Sprintf("form %s has no version index yet (no pass has committed a batch of it since syncd kept one): run `syncd once` first, or `%s` to build the index from the output", e.Stream, adoptCommand(e.Stream))
	}
	return fmt.Sprintf("form %s has the versions of its rows indexed from %s on (an older syncd kept them for sync.lookback only), so it cannot reconcile from %s: run `%s` to index the earlier rows from the output, or use --from %s or later",
		e.Stream, e.IndexedFrom.UTC().Format(time.RFC3339), e.From.UTC().Format(time.RFC3339), adoptCommand(e.Stream), e.IndexedFrom.UTC().Format(time.RFC3339))
}

// adoptCommand is the `syncd state adopt` of one stream: its key in its
// account's namespace is an argument, the account a flag.
func adoptCommand(streamKey string) string {
	ns, key := table.SplitStreamKey(streamKey)
	if ns == "" {
		return "syncd state adopt " + key
	}
	return "syncd state adopt " + key + " --account " + ns
}

// checkIndex returns an ErrNoIndex when st has no version index or, for a
// reconcile asked for (explicit), when the index starts after from. A zero
// from (sync.lookback 0) is the whole history the index covers.
func checkIndex(key string, st state.StreamState, from time.Time, explicit bool) error {
	if st.IndexedFrom.IsZero() || explicit && !from.IsZero() && from.Before(st.IndexedFrom) {
		return &ErrNoIndex{Stream: key, From: from, IndexedFrom: st.IndexedFrom}
	}
	return nil
}

// Reconcile re-reads the committed windows of one stream (a Reconciler)
// from from (zero: now - sync.lookback) to now - safety lag, and writes
// what changed: new versions, tombstones and late imports.
func (p *Poller) Reconcile(ctx context.Context, s Stream, from time.Time) Result {
	if err := p.checkReconcile(ctx, s, from); err != nil {
		return Result{Source: Source(s), Stream: s.Key(), Table: s.Table(), Err: err}
	}
	return p.pass(ctx, s, func(f *streamRun) error {
		if _, ok := s.(Reconciler); !ok {
			return fmt.Errorf("reconcile %s: its records are never changed after they are written, so there is nothing to reconcile", s.Key())
		}
		if _, err := f.prepare(ctx); err != nil {
			return err
		}
		f.reconciling = true
		return f.reconcile(ctx, from, p.Horizon(), true)
	})
}

// checkReconcile refuses, before the pass (which would record the refusal
// as the form's error), a reconcile of a range the version index does not
// cover: the operator's to change, so nothing is written.
func (p *Poller) checkReconcile(ctx context.Context, s Stream, from time.Time) error {
	if _, ok := s.(Reconciler); !ok {
		return nil // the pass says why there is nothing to reconcile
	}
	st, err := p.store.Get(ctx, s.Key())
	if err != nil {
		return fmt.Errorf("read state of form %s: %w", s.Key(), err)
	}
	if from.IsZero() && p.opts.Lookback > 0 {
		from = floorMS(p.opts.Now().Add(-p.opts.Lookback)) // as pass sets indexFrom
	}
	return checkIndex(s.Key(), st, from, true)
}

// reconcileDue reports whether a live pass should reconcile the form too.
func (f *streamRun) reconcileDue(st state.StreamState) bool {
	if _, ok := f.s.(Reconciler); !ok {
		return false
	}
	o := f.p.opts
	return o.Lookback > 0 && !st.IndexedFrom.IsZero() && o.Now().Sub(st.Reconciled) >= o.ReconcileEvery
}

// startIndex makes the version index start for a form that has none: at
// the beginning of time for a form with nothing committed (every batch
// records all its rows), or where the form's committed windows end (what
// was committed before the index existed is not in it).
func (f *streamRun) startIndex(ctx context.Context, st state.StreamState) error {
	if _, ok := f.s.(Reconciler); !ok || !st.IndexedFrom.IsZero() {
		return nil
	}
	from := epoch
	if len(st.Committed) > 0 {
		from = st.Committed.End()
	}
	// What the pass just read is current: the first reconcile is due one
	// interval from now. Both in one transaction: a kill between two would
	// leave an index never reconciled, and the next pass would re-read
	// every committed window.
	if err := f.p.store.Commit(ctx, f.key, state.Commit{IndexFrom: from, Reconciled: f.p.opts.Now()}); err != nil {
		return fmt.Errorf("start the version index of form %s: %w", f.key, err)
	}
	return nil
}

// reconcile re-reads [from, to) of the committed windows the index covers.
func (f *streamRun) reconcile(ctx context.Context, from, to time.Time, explicit bool) error {
	st, err := f.p.store.Get(ctx, f.key)
	if err != nil {
		return fmt.Errorf("read state of form %s: %w", f.key, err)
	}
	if from.IsZero() {
		from = f.indexFrom
	}
	if err := checkIndex(f.key, st, from, explicit); err != nil {
		return err
	}
	// Only a pass that reads all of the lookback stands for the scheduled
	// reconcile: one from a later date (inside the lookback, or past now,
	// reading nothing) must not put the next one off.
	whole := !from.After(maxTime(f.indexFrom, st.IndexedFrom))
	from = maxTime(from, st.IndexedFrom)
	passStart := f.p.opts.Now().UTC()
	for _, r := range st.Committed {
		lo, hi := maxTime(r.Start, from), minTime(r.End, to)
		if !lo.Before(hi) {
			continue
		}
		ws, err := f.cutByIndex(ctx, lo, hi)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if err := ctx.Err(); err != nil {
				return err
			}
			if f.p.Draining() {
				f.interrupted.Store(true)
				return nil
			}
			if err := f.reconcileWindow(ctx, w, passStart); err != nil {
				return err
			}
			f.reconciledWindows.Add(1)
		}
	}
	if !whole {
		return nil
	}
	return f.p.store.SetReconciled(ctx, f.key, passStart)
}

// cutByIndex cuts [lo, hi) into windows of at most MaxRowsPerBatch indexed
// records, reading the index in time order.
func (f *streamRun) cutByIndex(ctx context.Context, lo, hi time.Time) ([]window, error) {
	maxRows := f.p.opts.MaxRowsPerBatch
	var out []window
	start, n := lo, 0
	err := f.p.store.Versions(ctx, f.key, lo, hi, func(e state.Entry) error {
		if n > 0 && n%maxRows == 0 {
			if cut := floorMS(e.Time); cut.After(start) {
				out = append(out, window{start: start, end: cut, count: -1})
				start = cut
			}
		}
		n++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(out, window{start: start, end: hi, count: -1}), nil
}

// reconcileWindow reads one committed window again and commits what
// changed as a batch of its own, with a batch id of its own (the window's,
// and the reconcile pass's start). A window of an earlier run's open
// reconcile batch (w.id set) is read again under that id.
func (f *streamRun) reconcileWindow(ctx context.Context, w window, passStart time.Time) error {
	known := map[string]state.Version{}
	err := f.p.store.Versions(ctx, f.key, w.start, w.end, func(e state.Entry) error {
		known[e.ID] = e.Version
		return nil
	})
	if err != nil {
		return err
	}
	if w.seen.IsZero() {
		w.seen = passStart
	}
	changes, err := f.s.(Reconciler).Reconcile(ctx, Window{Start: w.start, End: w.end, Count: -1}, known, w.seen)
	if err != nil {
		return err
	}
	if changes.Empty() {
		if !w.redo {
			return nil
		}
		// An open batch of an earlier run that now finds no change still
		// commits, with no rows: that removes the files its earlier
		// attempt wrote and clears its intent.
		changes.Write = func(*Rows) error { return nil }
	}
	if w.id == "" {
		w.id = f.batchFor(w).ID + fmt.Sprintf("-r%d", passStart.UnixMilli())
	}
	b := f.batchFor(w)
	idx := changes.Index
	counts := &state.ReconcileCounts{Versions: len(idx.Put), Tombstones: len(idx.Gone)}
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, Layout: string(b.Layout), CreatedAt: w.seen, Reconcile: true, Index: &idx, Counts: counts}
	if err := f.p.store.RecordIntent(ctx, f.key, intent); err != nil {
		return fmt.Errorf("record intent of reconcile batch %s: %w", b.ID, err)
	}
	err = f.commitBatch(ctx, w, b, intent, changes.Write, func(in *state.Intent, c *state.Commit, _ *Rows) {
		c.Index, c.Reconcile = in.Index, counts
	})
	if err != nil {
		return err
	}
	f.versions.Add(int64(counts.Versions))
	f.tombstones.Add(int64(counts.Tombstones))
	f.log.Info("reconcile: changes found in a committed window", zap.String(logkey.BatchID, b.ID),
		zap.Int(logkey.Versions, counts.Versions), zap.Int(logkey.Tombstones, counts.Tombstones),
		zap.Time(logkey.WindowStart, w.start), zap.Time(logkey.WindowEnd, w.end))
	return nil
}

// recheck re-reads the parts of wins that before (the committed windows
// before this pass) holds, up to to, as a reconcile of those windows
// only: a webhook delivery announced a record there. It sets f.rechecked:
// a window is committed when the state now covers it and every part of it
// committed before was read again. A part the version index does not
// reach is left to `syncd reconcile` (logged), never read: without the
// index a re-read cannot tell a new row from one written before.
func (f *streamRun) recheck(ctx context.Context, before state.Intervals, wins []state.Interval, to time.Time) error {
	f.rechecked = make([]bool, len(wins))
	st, err := f.p.store.Get(ctx, f.key)
	if err != nil {
		return fmt.Errorf("read state of %s to re-read announced windows: %w", f.key, err)
	}
	_, reconciler := f.s.(Reconciler)
	passStart := f.p.opts.Now().UTC()
	for i, w := range wins {
		w = state.Interval{Start: state.Normalize(w.Start), End: state.Normalize(w.End)}
		ok := st.Committed.Covers(w)
		for _, part := range overlap(before, w) {
			if !reconciler {
				// Its records never change once written, and a new one never
				// lands behind the checkpoint: nothing to read again.
				continue
			}
			if st.IndexedFrom.IsZero() || part.Start.Before(st.IndexedFrom) || part.End.After(to) {
				ok = false
				f.log.Info("a webhook delivery announced a submission where the version index does not reach; `syncd reconcile --from` (after `syncd state adopt`) reads it",
					zap.Time(logkey.WindowStart, part.Start), zap.Time(logkey.WindowEnd, part.End), zap.Time(logkey.IndexedFrom, st.IndexedFrom))
				continue
			}
			ws, err := f.cutByIndex(ctx, part.Start, part.End)
			if err != nil {
				return fmt.Errorf("re-read announced window %s of %s: %w", part, f.key, err)
			}
			for _, cw := range ws {
				if f.p.Draining() {
					f.interrupted.Store(true)
					return nil
				}
				if err := f.reconcileWindow(ctx, cw, passStart); err != nil {
					return fmt.Errorf("re-read announced window %s of %s: %w", part, f.key, err)
				}
				f.reconciling = true
				f.reconciledWindows.Add(1)
			}
		}
		f.rechecked[i] = ok
	}
	return nil
}

// overlap is the part of w that s holds.
func overlap(s state.Intervals, w state.Interval) []state.Interval {
	var out []state.Interval
	for _, c := range s {
		lo, hi := maxTime(c.Start, w.Start), minTime(c.End, w.End)
		if lo.Before(hi) {
			out = append(out, state.Interval{Start: lo, End: hi})
		}
	}
	return out
}
