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

	"github.com/syncd-dev/syncd/internal/forms"
	"github.com/syncd-dev/syncd/internal/schema"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// countingSource counts the requests one pass makes, for its summary.
type countingSource struct {
	Source
	count atomic.Int64
}

func (c *countingSource) GetForm(ctx context.Context, formID string) (*forms.Form, error) {
	c.count.Add(1)
	return c.Source.GetForm(ctx, formID)
}

func (c *countingSource) ListSubmissions(ctx context.Context, formID string, p forms.ListParams) (*forms.SubmissionPage, error) {
	c.count.Add(1)
	return c.Source.ListSubmissions(ctx, formID, p)
}

// window is a planned half-open range, of one UTC day unless the sink takes
// batches that span days, with the count the service gave for it when it was
// planned (-1 when unknown).
type window struct {
	start, end time.Time
	count      int
	// An open batch of an earlier run: its table (when it differs from the
	// form's), and a failure keeps its intent, since that run's commit may
	// still land.
	redo  bool
	table string
	id    string // the open batch's id, as its intent recorded it
}

// formRun is one pass over one form.
type formRun struct {
	p        *Poller
	src      *countingSource
	job      Job
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
	pinned      *schema.Table
	metaFetched bool

	// interrupted: Drain stopped planning before the range was done.
	interrupted atomic.Bool
}

// recordError keeps the pass's error in the form's state, for `state
// show`; a form the state does not hold yet (a typo, a form that never
// committed anything) is not added for it.
func (f *formRun) recordError(ctx context.Context, err error) {
	st, gerr := f.p.store.Get(ctx, f.job.FormID)
	if gerr != nil || (len(st.Committed) == 0 && len(st.Intents) == 0 && st.Batches == 0) {
		return
	}
	if serr := f.p.store.SetError(ctx, f.job.FormID, err.Error()); serr != nil {
		f.log.Warn("could not record the error in the state store", zap.Error(serr))
	}
}

// epoch stands for "the beginning of the form's history": no afterDate is sent.
var epoch = time.Unix(0, 0).UTC()

func (f *formRun) execute(ctx context.Context, from, to time.Time, concurrency int) error {
	store := f.p.store
	st, err := store.Get(ctx, f.job.FormID)
	if err != nil {
		return fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
	}
	f.table = f.job.Table
	if f.table == "" {
		f.table = DefaultTable(f.job.FormID)
	}
	if st.Refresh != nil {
		// A refresh stopped part-way: finish removing the old output before
		// anything new is written, or old and new rows would mix.
		if st, err = f.p.finishRefresh(ctx, f.job.FormID, st); err != nil {
			return err
		}
	}
	if end := st.Committed.End(); end.After(f.p.opts.Now()) {
		return &FutureCommitError{FormID: f.job.FormID, End: end, LastSuccess: st.LastSuccess}
	}
	f.gen = st.Generation
	redo, err := f.recoverIntents(ctx, st)
	if err != nil {
		return err
	}
	if st, err = store.Get(ctx, f.job.FormID); err != nil {
		return fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
	}
	if len(st.Schema) > 0 {
		if f.pinned, err = schema.Unmarshal(st.Schema); err != nil {
			return fmt.Errorf("read the pinned schema of form %s from the state store: %w", f.job.FormID, err)
		}
	}
	for _, w := range redo {
		if err := f.processWindow(ctx, w); err != nil {
			return fmt.Errorf("finish the open batch of form %s left by an earlier run: %w", f.job.FormID, err)
		}
	}
	if len(redo) > 0 {
		if st, err = store.Get(ctx, f.job.FormID); err != nil {
			return fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
		}
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
	if f.progress != nil {
		// One request tells how much the run has to do, for the ETA.
		for _, g := range gaps {
			page, err := f.list(ctx, g.Start, g.End, 1, 0, false)
			if err != nil {
				return err
			}
			f.expected += int64(page.TotalResponses)
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
	emit := func(w window) error {
		select {
		case <-f.p.draining:
			return errDraining
		default:
		}
		select {
		case windows <- w:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-f.p.draining:
			return errDraining
		}
	}
	for _, g := range gaps {
		if err := f.plan(ctx, g, emit); err != nil {
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
	return "form_" + schema.SanitizeName(formID)
}

func (f *formRun) report(p Progress) {
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
func (f *formRun) recoverIntents(ctx context.Context, st state.FormState) ([]window, error) {
	ids := make([]string, 0, len(st.Intents))
	for id := range st.Intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var redo []window
	for _, id := range ids {
		in := st.Intents[id]
		w := window{start: in.Start, end: in.End, count: -1, redo: true, table: in.Table, id: id}
		b := f.batchFor(w)
		done, err := f.p.sink.Committed(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("resolve open batch %s of form %s: ask the sink: %w", id, f.job.FormID, err)
		}
		if !done {
			f.log.Info("an open batch never reached the sink; fetching its window again under the same batch id", zap.String("batch_id", id))
			redo = append(redo, w)
			continue
		}
		err = f.p.store.Commit(ctx, f.job.FormID, state.Commit{BatchID: id, Window: state.Interval{Start: in.Start, End: in.End}, Rows: in.Rows})
		if err != nil {
			return nil, fmt.Errorf("resolve open batch %s of form %s: %w", id, f.job.FormID, err)
		}
		f.log.Info("recovered a batch committed before a stop", zap.String("batch_id", id))
		f.recovered++
	}
	return redo, nil
}

func (f *formRun) batchFor(w window) sink.Batch {
	table := f.table
	if w.table != "" {
		table = w.table
	}
	id := w.id
	if id == "" {
		id = BatchID(f.job.FormID, w.start, w.end)
		if f.gen > 0 {
			id += fmt.Sprintf("-g%d", f.gen)
		}
	}
	return sink.Batch{
		ID:          id,
		FormID:      f.job.FormID,
		Table:       table,
		Day:         dayStart(w.start),
		WindowStart: w.start,
		WindowEnd:   w.end,
	}
}

// list asks for submissions of [start, end) in ascending order. The API's
// inclusivity of afterDate and beforeDate is unknown, so the query reaches
// one millisecond before start and stops at end; callers filter to exactly
// [start, end).
func (f *formRun) list(ctx context.Context, start, end time.Time, limit, offset int, editLink bool) (*forms.SubmissionPage, error) {
	p := forms.ListParams{Limit: limit, Offset: offset, Sort: forms.SortAsc, IncludeEditLink: editLink}
	if start.After(epoch) {
		after := start.Add(-time.Millisecond)
		p.AfterDate = &after
	}
	before := end
	p.BeforeDate = &before
	page, err := f.src.ListSubmissions(ctx, f.job.FormID, p)
	if err != nil {
		return nil, fmt.Errorf("list submissions of form %s in [%s, %s): %w", f.job.FormID, forms.FormatTime(start), forms.FormatTime(end), err)
	}
	return page, nil
}

// commitEmpty records a range the service says holds no submission.
func (f *formRun) commitEmpty(ctx context.Context, start, end time.Time) error {
	if !start.Before(end) {
		return nil
	}
	if err := f.p.checkHorizon(f.job.FormID, end); err != nil {
		return err
	}
	if err := f.p.store.Commit(ctx, f.job.FormID, state.Commit{Window: state.Interval{Start: start, End: end}}); err != nil {
		return fmt.Errorf("record empty range of form %s: %w", f.job.FormID, err)
	}
	return nil
}

// plan cuts the gap [a, b) into windows that never cross a UTC midnight and
// count at most MaxRowsPerBatch submissions, skipping empty stretches with
// one request each: the first submission of what is left tells where data
// resumes. For a sink whose batches may span days, windows are bounded by
// their count only, so that a pass over a gap of at most MaxRowsPerBatch
// submissions commits one batch, and a larger gap (a backfill, a long
// stop) is cut near MaxRowsPerBatch by the counts rather than by halves.
func (f *formRun) plan(ctx context.Context, gap state.Interval, emit func(window) error) error {
	a, b := gap.Start, gap.End
	maxRows := f.p.opts.MaxRowsPerBatch
	for a.Before(b) {
		page, err := f.list(ctx, a, b, 1, 0, false)
		if err != nil {
			return err
		}
		if page.TotalResponses == 0 || len(page.Responses) == 0 || !page.Responses[0].SubmissionTime.Before(b) {
			return f.commitEmpty(ctx, a, b)
		}
		first := floorMS(page.Responses[0].SubmissionTime)
		start := maxTime(a, dayStart(maxTime(a, first)))
		if err := f.commitEmpty(ctx, a, start); err != nil {
			return err
		}
		end := b
		if !f.p.spanDays {
			end = minTime(b, nextMidnight(start))
		}
		count := -1
		if start.Equal(a) && end.Equal(b) {
			count = page.TotalResponses
		}
		for {
			if count < 0 {
				p, err := f.list(ctx, start, end, 1, 0, false)
				if err != nil {
					return err
				}
				count = p.TotalResponses
			}
			if count <= maxRows {
				break
			}
			m := midpoint(start, end)
			if f.p.spanDays {
				m = splitAt(start, end, count, maxRows)
			}
			if m.Equal(end) {
				break // a single millisecond holds more than a batch: take it whole
			}
			end, count = m, -1
		}
		if err := emit(window{start: start, end: end, count: count}); err != nil {
			return err
		}
		a = end
	}
	return nil
}
