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

// window is a planned half-open range bounded by its row count, with the
// count the service gave for it when it was planned (-1 when unknown).
type window struct {
	start, end time.Time
	count      int
	// first is the window's first page when planning already fetched it
	// (a gap that fits one window): the walk starts from it.
	first *forms.SubmissionPage
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

// formRun is one pass over one stream: a form, or (stream set) a stream
// whose table has a fixed schema. Every stream runs through its prepare,
// recovery, intents, spool and commits.
type formRun struct {
	p        *Poller
	src      *countingSource
	job      Job // the stream's key is job.FormID
	stream   Stream
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
	// What reconciles did in this pass.
	reconciling                             bool
	reconciledWindows, versions, tombstones atomic.Int64
	// dry: planning only (Plan); nothing is recorded.
	dry bool
	// indexFrom: where a scheduled reconcile starts re-reading (now -
	// sync.lookback); zero: sync.lookback is 0.
	indexFrom time.Time
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

// prepare readies a pass over the form: it finishes a refresh a stop left
// half done, refuses a state committed past now, resolves the batches an
// earlier run left open (fetching again those the sink lacks) and loads the
// pinned schema. It returns the state after all that.
func (f *formRun) prepare(ctx context.Context) (state.FormState, error) {
	store := f.p.store
	st, err := store.Get(ctx, f.job.FormID)
	if err != nil {
		return st, fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
	}
	f.table = f.job.Table
	if f.table == "" {
		f.table = DefaultTable(f.job.FormID)
	}
	if st.Refresh != nil {
		// A refresh stopped part-way: finish removing the old output before
		// anything new is written, or old and new rows would mix.
		if st, err = f.p.finishRefresh(ctx, f.job.FormID, st); err != nil {
			return st, err
		}
	}
	if end := st.Committed.End(); end.After(f.p.opts.Now()) {
		return st, &FutureCommitError{FormID: f.job.FormID, End: end, LastSuccess: st.LastSuccess}
	}
	if err := f.p.checkOwnOutput(ctx, f.job.FormID, f.table, st); err != nil {
		return st, err
	}
	f.gen = st.Generation
	redo, err := f.recoverIntents(ctx, st)
	if err != nil {
		return st, err
	}
	if st, err = store.Get(ctx, f.job.FormID); err != nil {
		return st, fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
	}
	if len(st.Schema) > 0 {
		if f.pinned, err = schema.Unmarshal(st.Schema); err != nil {
			return st, fmt.Errorf("read the pinned schema of form %s from the state store: %w", f.job.FormID, err)
		}
	}
	for _, w := range redo {
		switch {
		case f.stream != nil:
			err = f.processStreamWindow(ctx, w)
		case w.reconcile:
			err = f.reconcileWindow(ctx, w, w.seen)
		default:
			err = f.processWindow(ctx, w)
		}
		if err != nil {
			return st, fmt.Errorf("finish the open batch of form %s left by an earlier run: %w", f.job.FormID, err)
		}
	}
	if len(redo) > 0 {
		if st, err = store.Get(ctx, f.job.FormID); err != nil {
			return st, fmt.Errorf("read state of form %s: %w", f.job.FormID, err)
		}
	}
	return st, nil
}

// epoch stands for "the beginning of the form's history": no afterDate is sent.
var epoch = time.Unix(0, 0).UTC()

func (f *formRun) execute(ctx context.Context, from, to time.Time, concurrency int) error {
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
	redo, recovered, err := f.p.recoverIntents(ctx, st, f.log, f.batchFor)
	f.recovered += recovered
	return redo, err
}

// recoverIntents resolves the open batches of one stream's state: those the
// sink holds are committed in the state, the others returned to be fetched
// again under their own ids.
func (p *Poller) recoverIntents(ctx context.Context, st state.FormState, log *zap.Logger, batchFor func(window) sink.Batch) (redo []window, recovered int, err error) {
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
			return nil, recovered, fmt.Errorf("resolve open batch %s of %s: ask the sink: %w", id, st.FormID, err)
		}
		if !done {
			log.Info("an open batch never reached the sink; fetching its window again under the same batch id", zap.String("batch_id", id))
			redo = append(redo, w)
			continue
		}
		// The commit applies the index change the intent recorded.
		c := state.Commit{BatchID: id, Window: state.Interval{Start: in.Start, End: in.End}, Rows: in.Rows}
		if in.Reconcile {
			c.Reconcile = &state.ReconcileCounts{}
			if in.Counts != nil {
				*c.Reconcile = *in.Counts
			}
		}
		err = p.store.Commit(ctx, st.FormID, c)
		if err != nil {
			return nil, recovered, fmt.Errorf("resolve open batch %s of %s: %w", id, st.FormID, err)
		}
		log.Info("recovered a batch committed before a stop", zap.String("batch_id", id))
		recovered++
	}
	return redo, recovered, nil
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
	b := sink.Batch{
		ID:            id,
		FormID:        f.job.FormID,
		Table:         table,
		WindowStart:   w.start,
		WindowEnd:     w.end,
		TimeColumn:    schema.ColSubmissionTime,
		KeyColumn:     schema.ColSubmissionID,
		VersionColumn: schema.ColLastUpdatedAt,
		Parts:         w.parts,
		Attempt:       w.attempt,
	}
	if f.stream != nil {
		// A stream's rows are its versions, along their version time.
		b.TimeColumn, b.KeyColumn, b.VersionColumn = f.stream.TimeColumn(), f.stream.KeyColumn(), f.stream.TimeColumn()
	}
	return b
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
	if !start.Before(end) || f.dry {
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

// plan cuts the gap [a, b) into windows of at most MaxRowsPerBatch rows.
// Its first request is the first page of the gap, whose total tells how
// much the gap holds: an empty gap costs that one request, and a gap that
// fits one window (every incremental pass, every sparse form) is fetched
// from that page on, so planning costs nothing more. A larger gap is cut by
// counts (one limit=1 request each), at the start of a partition of the
// sink where one falls inside the window, so that a pass writes one file
// per partition unless one partition alone holds more than a batch.
func (f *formRun) plan(ctx context.Context, gap state.Interval, emit func(window) error) error {
	a, b := gap.Start, gap.End
	maxRows := f.p.opts.MaxRowsPerBatch
	for a.Before(b) {
		page, err := f.list(ctx, a, b, f.p.opts.PageSize, 0, f.p.opts.IncludeEditLink)
		if err != nil {
			return err
		}
		if page.TotalResponses == 0 || len(page.Responses) == 0 {
			return f.commitEmpty(ctx, a, b)
		}
		if page.TotalResponses <= maxRows {
			return emit(window{start: a, end: b, count: page.TotalResponses, first: page})
		}
		end, count, err := f.split(ctx, a, b, page)
		if err != nil {
			return err
		}
		if err := emit(window{start: a, end: end, count: count}); err != nil {
			return err
		}
		a = end
	}
	return nil
}

// split picks the end of the first window of [a, b), which counts total >
// MaxRowsPerBatch submissions: an instant whose window counts between half
// and all of a batch, found by interpolating on counts (submissions are
// seldom spread evenly: a form may be sparse for years and dense for a
// week), then moved back to the start of its partition when that is still
// inside the window. A single millisecond holding more than a batch is
// taken whole.
func (f *formRun) split(ctx context.Context, a, b time.Time, first *forms.SubmissionPage) (time.Time, int, error) {
	lo := a
	// Nothing lies before the gap's first submission: a form sparse for
	// years starts the search where its data does.
	for _, sub := range first.Responses {
		if t := floorMS(sub.SubmissionTime); !t.Before(a) && t.Before(b) {
			lo = t
			break
		}
	}
	return f.p.split(a, lo, b, first.TotalResponses, func(t time.Time) (int, error) {
		page, err := f.list(ctx, a, t, 1, 0, false)
		if err != nil {
			return 0, err
		}
		return page.TotalResponses, nil
	})
}

// split picks the end of the first window of [a, b), which counts total >
// MaxRowsPerBatch records, none before lo: an instant whose window [a, t)
// counts (with count) between half and all of a batch, found by
// interpolating on counts (records are seldom spread evenly), then moved
// back to the start of its partition when that is still inside the
// window (the window's count is then -1, unknown). A single millisecond
// holding more than a batch is taken whole.
func (p *Poller) split(a, lo, b time.Time, total int, count func(t time.Time) (int, error)) (time.Time, int, error) {
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
	if p.partStart != nil {
		if s := floorMS(p.partStart(lo)); s.After(a) && s.Before(lo) {
			return s, -1, nil
		}
	}
	return lo, loN, nil
}
