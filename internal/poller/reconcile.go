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
// of the committed windows within sync.lookback (no count request: the
// version index in the state says how the windows are cut) and compares
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
		return fmt.Sprintf("form %s has no version index yet (sync.lookback is 0, or no pass ran since it was set): a reconcile compares with it, so there is nothing to compare with; use `syncd refresh --form %s` to rewrite the table instead", e.FormID, e.FormID)
	}
	return fmt.Sprintf("form %s keeps the versions of its rows from %s on (sync.lookback), so it cannot reconcile from %s: use --from %s or later, or `syncd refresh --form %s` to rewrite the table",
		e.FormID, e.IndexedFrom.UTC().Format(time.RFC3339), e.From.UTC().Format(time.RFC3339), e.IndexedFrom.UTC().Format(time.RFC3339), e.FormID)
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
// now - lookback, or where the form's committed windows end when they end
// later (what was committed before the index existed is not in it).
func (f *formRun) startIndex(ctx context.Context, st state.FormState) error {
	if f.indexFrom.IsZero() || !st.IndexedFrom.IsZero() {
		return nil
	}
	from := maxTime(f.indexFrom, st.Committed.End())
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
		for _, w := range cutByIndex(lo, hi, st.Versions, f.p.opts.MaxRowsPerBatch) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if f.p.Draining() {
				f.interrupted.Store(true)
				return nil
			}
			if err := f.reconcileWindow(ctx, w, st.Versions, passStart); err != nil {
				return err
			}
			f.reconciledWindows.Add(1)
		}
	}
	// The index keeps only the lookback: older ids leave it.
	if !f.indexFrom.IsZero() {
		if st, err = f.p.store.Get(ctx, f.job.FormID); err != nil {
			return fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
		}
		var gone []string
		for id, v := range st.Versions {
			if v.Time.Before(f.indexFrom) {
				gone = append(gone, id)
			}
		}
		if len(gone) > 0 || f.indexFrom.After(st.IndexedFrom) {
			c := state.Commit{Gone: gone, IndexFrom: maxTime(f.indexFrom, st.IndexedFrom)}
			if err := f.p.store.Commit(ctx, f.job.FormID, c); err != nil {
				return fmt.Errorf("trim the version index of form %s: %w", f.job.FormID, err)
			}
		}
	}
	if err := f.p.store.SetReconciled(ctx, f.job.FormID, passStart); err != nil {
		return err
	}
	return nil
}

// cutByIndex cuts [lo, hi) into windows of at most maxRows indexed records.
func cutByIndex(lo, hi time.Time, index map[string]state.Version, maxRows int) []window {
	var times []time.Time
	for _, v := range index {
		if !v.Time.Before(lo) && v.Time.Before(hi) {
			times = append(times, v.Time)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var out []window
	start := lo
	for i := maxRows; i < len(times); i += maxRows {
		cut := floorMS(times[i])
		if cut.After(start) {
			out = append(out, window{start: start, end: cut, count: -1})
			start = cut
		}
	}
	return append(out, window{start: start, end: hi, count: -1})
}

// reconcileWindow reads one committed window again and commits what
// changed as a batch of its own, with a batch id of its own (the window's,
// and the reconcile pass's start). A window of an earlier run's open
// reconcile batch (w.id set) is read again under that id.
func (f *formRun) reconcileWindow(ctx context.Context, w window, index map[string]state.Version, passStart time.Time) error {
	known := map[string]state.Version{}
	for id, v := range index {
		if !v.Time.Before(w.start) && v.Time.Before(w.end) {
			known[id] = v
		}
	}
	var changed []forms.Submission
	seen, err := f.fetch(ctx, w, func(sub *forms.Submission) error {
		if v, ok := known[sub.SubmissionID]; ok && v.Updated.Equal(state.Normalize(versionOf(sub).Updated)) {
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
	vers := make(map[string]state.Version, len(changed))
	for i := range changed {
		vers[changed[i].SubmissionID] = versionOf(&changed[i])
	}
	intent := state.Intent{BatchID: b.ID, Table: b.Table, Start: w.start, End: w.end, Parts: w.parts, Attempt: w.attempt, CreatedAt: w.seen, Reconcile: true, Versions: vers, Gone: gone}
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
	counts := &state.ReconcileCounts{Versions: len(vers), Tombstones: len(gone)}
	err = f.commitBatch(ctx, w, b, intent, fill, func(in *state.Intent, c *state.Commit) {
		c.Versions, c.Gone, c.Reconcile = in.Versions, in.Gone, counts
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
