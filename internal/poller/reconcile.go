package poller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/state"
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
	FormID      string
	From        time.Time
	IndexedFrom time.Time
}

func (e *ErrNoIndex) Error() string {
	if e.IndexedFrom.IsZero() {
		return fmt.Sprintf("form %s has no version index yet (no pass has committed a batch of it since syncd kept one): run `syncd once` first, or `syncd state adopt --form %s` to build the index from the output", e.FormID, e.FormID)
	}
	return fmt.Sprintf("form %s has the versions of its rows indexed from %s on (an older syncd kept them for sync.lookback only), so it cannot reconcile from %s: run `syncd state adopt --form %s` to index the earlier rows from the output, or use --from %s or later",
		e.FormID, e.IndexedFrom.UTC().Format(time.RFC3339), e.From.UTC().Format(time.RFC3339), e.FormID, e.IndexedFrom.UTC().Format(time.RFC3339))
}

// Reconcile re-reads the committed windows of one form from from (zero:
// now - sync.lookback) to now - safety lag, and writes what changed: new
// versions, tombstones and late imports.
func (p *Poller) Reconcile(ctx context.Context, job Job, from time.Time) Result {
	return p.pass(ctx, job, nil, func(f *formRun) error {
		if _, err := f.prepare(ctx); err != nil {
			return err
		}
		f.reconciling = true
		return f.reconcile(ctx, from, p.Horizon(), true)
	})
}

// reconcileDue reports whether a live pass should reconcile the form too.
func (f *formRun) reconcileDue(st state.FormState) bool {
	o := f.p.opts
	return o.Lookback > 0 && !st.IndexedFrom.IsZero() && o.Now().Sub(st.Reconciled) >= o.ReconcileEvery
}

// startIndex makes the version index start for a form that has none: at
// the beginning of time for a form with nothing committed (every batch
// records all its rows), or where the form's committed windows end (what
// was committed before the index existed is not in it).
func (f *formRun) startIndex(ctx context.Context, st state.FormState) error {
	if !st.IndexedFrom.IsZero() || f.dry {
		return nil
	}
	from := epoch
	if len(st.Committed) > 0 {
		from = st.Committed.End()
	}
	if err := f.p.store.Commit(ctx, f.job.FormID, state.Commit{IndexFrom: from}); err != nil {
		return fmt.Errorf("start the version index of form %s: %w", f.job.FormID, err)
	}
	// What the pass just read is current: the first reconcile is due one
	// interval from now.
	return f.p.store.SetReconciled(ctx, f.job.FormID, f.p.opts.Now())
}

// reconcile re-reads [from, to) of the committed windows the index covers.
func (f *formRun) reconcile(ctx context.Context, from, to time.Time, explicit bool) error {
	st, err := f.p.store.Get(ctx, f.job.FormID)
	if err != nil {
		return fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
	}
	if from.IsZero() {
		from = f.indexFrom
	}
	if st.IndexedFrom.IsZero() || (explicit && from.Before(st.IndexedFrom)) {
		return &ErrNoIndex{FormID: f.job.FormID, From: from, IndexedFrom: st.IndexedFrom}
	}
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
	return f.p.store.SetReconciled(ctx, f.job.FormID, passStart)
}

// cutByIndex cuts [lo, hi) into windows of at most MaxRowsPerBatch indexed
// records, reading the index in time order.
func (f *formRun) cutByIndex(ctx context.Context, lo, hi time.Time) ([]window, error) {
	maxRows := f.p.opts.MaxRowsPerBatch
	var out []window
	start, n := lo, 0
	err := f.p.store.Versions(ctx, f.job.FormID, lo, hi, func(e state.Entry) error {
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
func (f *formRun) reconcileWindow(ctx context.Context, w window, passStart time.Time) error {
	known := map[string]state.Version{}
	err := f.p.store.Versions(ctx, f.job.FormID, w.start, w.end, func(e state.Entry) error {
		known[e.ID] = e.Version
		return nil
	})
	if err != nil {
		return err
	}
	var changed []forms.Submission
	seen, err := f.fetch(ctx, w, func(sub *forms.Submission) error {
		if v, ok := known[sub.SubmissionID]; ok && v.Hash == entryOf(sub).Hash {
			return nil
		}
		changed = append(changed, *sub)
		return nil
	})
	if err != nil {
		return err
	}
	var gone []string
	for id := range known {
		if _, ok := seen[id]; !ok {
			gone = append(gone, id)
		}
	}
	if len(changed) == 0 && len(gone) == 0 {
		return nil
	}
	slices.Sort(gone)
	if w.id == "" {
		w.id = f.batchFor(w).ID + fmt.Sprintf("-r%d", passStart.UnixMilli())
	}
	if w.seen.IsZero() {
		w.seen = passStart
	}
	b := f.batchFor(w)
	idx := &state.IndexChange{Put: make([]state.Entry, len(changed)), Gone: make([]state.Entry, len(gone))}
	for i := range changed {
		idx.Put[i] = entryOf(&changed[i])
	}
	for i, id := range gone {
		idx.Gone[i] = state.Entry{ID: id, Version: known[id]}
	}
	counts := &state.ReconcileCounts{Versions: len(changed), Tombstones: len(gone)}
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, CreatedAt: w.seen, Reconcile: true, Index: idx, Counts: counts}
	if err := f.p.store.RecordIntent(ctx, f.job.FormID, intent); err != nil {
		return fmt.Errorf("record intent of reconcile batch %s: %w", b.ID, err)
	}
	fill := func(rows *batchRows, lin schema.Lineage) error {
		for i := range changed {
			if err := rows.Append(&changed[i], lin); err != nil {
				return fmt.Errorf("map submission %s of form %s: %w", changed[i].SubmissionID, f.job.FormID, err)
			}
		}
		for _, id := range gone {
			if err := rows.AppendTombstone(id, known[id].Time, w.seen, lin); err != nil {
				return err
			}
		}
		return nil
	}
	err = f.commitBatch(ctx, w, b, intent, fill, func(in *state.Intent, c *state.Commit) {
		c.Index, c.Reconcile = in.Index, counts
	})
	if err != nil {
		return err
	}
	f.versions.Add(int64(counts.Versions))
	f.tombstones.Add(int64(counts.Tombstones))
	f.log.Info("reconcile: changes found in a committed window", zap.String("batch_id", b.ID),
		zap.Int("versions", counts.Versions), zap.Int("tombstones", counts.Tombstones),
		zap.Time("window_start", w.start), zap.Time("window_end", w.end))
	return nil
}
