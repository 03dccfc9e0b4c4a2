// Package forms is the Forms API as a source of the engine: each form a
// stream (Stream) whose table follows its questions, whose records are
// versioned by lastUpdatedAt and reconciled, planned by the first page of
// each gap and counts. The API client is internal/source/forms/api.
package forms

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/ids"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/poller"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/table"
)

// API is the part of the Forms API a stream reads. *Client is one.
type API interface {
	GetForm(ctx context.Context, formID string) (*api.Form, error)
	ListSubmissions(ctx context.Context, formID string, p api.ListParams) (*api.SubmissionPage, error)
}

// StreamOptions tune a form's stream; zero values take the defaults.
type StreamOptions struct {
	PageSize        int  // submissions per page, at most 150 (default 150)
	IncludeEditLink bool // request and export editLink
	MaxRefetches    int  // re-walks of a window that changed while it was paged (default 3)
	// Namespace is the account's: the stream's key is
	// table.StreamKey(Namespace, form id).
	Namespace string
	Logger    *zap.Logger
}

// Stream is one form's submissions as a stream of the engine (a
// poller.Stream that plans, evolves its table and reconciles): windows of
// submission time, paged by offset in ascending order, each row keyed by
// its submission id and versioned by its lastUpdatedAt.
type Stream struct {
	api      API
	form     string
	key      string
	table    string
	opts     StreamOptions
	log      *zap.Logger
	requests atomic.Int64
}

var (
	_ poller.Stream     = (*Stream)(nil)
	_ poller.Planner    = (*Stream)(nil)
	_ poller.Counter    = (*Stream)(nil)
	_ poller.Evolver    = (*Stream)(nil)
	_ poller.Reconciler = (*Stream)(nil)
)

// NewStream is the stream of form formID, written to table (empty: the
// default table of the form).
func NewStream(client API, formID, tableName string, opts StreamOptions) *Stream {
	if opts.PageSize <= 0 || opts.PageSize > api.MaxListLimit {
		opts.PageSize = api.MaxListLimit
	}
	if opts.MaxRefetches <= 0 {
		opts.MaxRefetches = 3
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if tableName == "" {
		tableName = poller.DefaultTable(formID)
	}
	return &Stream{api: client, form: formID, table: tableName, opts: opts, key: table.StreamKey(opts.Namespace, formID),
		log: opts.Logger.With(zap.String(logkey.Stream, formID))}
}

// Key is the form's id in its account's namespace: its state record and
// batch ids are named after it.
func (s *Stream) Key() string { return s.key }

// Form is the form's id.
func (s *Stream) Form() string { return s.form }

// Table is the table the form is written to.
func (s *Stream) Table() string { return s.table }

// Columns: windows and partitions follow the submission time; a
// submission's rows are its versions, ordered by lastUpdatedAt.
func (s *Stream) Columns() poller.Columns {
	return poller.Columns{Time: schema.ColSubmissionTime, Key: schema.ColSubmissionID, Version: schema.ColLastUpdatedAt,
		Required: []string{schema.ColFormID, schema.ColSubmissionID, schema.ColSubmissionTime}}
}

// Description is what the form's table holds.
func (s *Stream) Description() string { return "Submissions of form " + s.form }

// Requests is how many requests the stream has made.
func (s *Stream) Requests() int64 { return s.requests.Load() }

func (s *Stream) getForm(ctx context.Context) (*api.Form, error) {
	s.requests.Add(1)
	return s.api.GetForm(ctx, s.form)
}

// Evolve maps the form's questions to its table: a new table on the first
// pass, the pinned one evolved after.
func (s *Stream) Evolve(ctx context.Context, pinned table.Schema) (table.Schema, []table.Change, error) {
	form, err := s.getForm(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read metadata of form %s: %w", s.form, err)
	}
	var t *schema.Table
	var changes []schema.Change
	if p, ok := pinned.(Pinned); ok {
		t, changes, err = p.T.Evolve(form)
	} else {
		t, changes, err = schema.New(form, schema.Options{IncludeEditLink: s.opts.IncludeEditLink})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("map the metadata of form %s to a table: %w", s.form, err)
	}
	return Pinned{T: t, names: schema.NewNames(t)}, changes, nil
}

// Unpin reads a form's schema that Pinned.Marshal wrote.
func (s *Stream) Unpin(raw []byte) (table.Schema, error) {
	t, err := schema.Unmarshal(raw)
	if err != nil {
		return nil, err
	}
	return Pinned{T: t}, nil
}

// Pinned is a form's table (its columns pinned by question id) as the
// engine handles it (table.Schema).
type Pinned struct {
	T *schema.Table
	// names, set on a pass's table (Evolve's), names the columns its
	// windows' builders add, so that concurrent windows agree on them.
	names *schema.Names
}

// ArrowSchema is the table's Arrow schema.
func (p Pinned) ArrowSchema() *arrow.Schema { return p.T.ArrowSchema() }

// Fingerprint names the table's physical schema.
func (p Pinned) Fingerprint() string { return p.T.Fingerprint() }

// Marshal is schema.Marshal.
func (p Pinned) Marshal() ([]byte, error) { return schema.Marshal(p.T) }

// Merge keeps the columns of both tables (schema.Table.Merge); a schema of
// another source's has nothing to add.
func (p Pinned) Merge(other table.Schema) table.Schema {
	o, ok := other.(Pinned)
	if !ok {
		return p
	}
	return Pinned{T: p.T.Merge(o.T), names: p.names}
}

// builderFor starts a window's builder on its own copy of the pass's table.
func builderFor(rows *poller.Rows) *schema.Builder {
	p, _ := rows.Table().(Pinned)
	var t *schema.Table
	if p.T != nil {
		t = p.T.Clone()
	}
	b := schema.NewBuilder(t, rows.Allocator())
	if p.names != nil {
		b.ShareNames(p.names)
	}
	return b
}

// list asks for submissions of [start, end) in ascending order. The API's
// inclusivity of afterDate and beforeDate is unknown, so the query reaches
// one millisecond before start and stops at end; callers filter to exactly
// [start, end).
//
// bufs, when set, is reused for the page (api.ListParams.Buffers).
func (s *Stream) list(ctx context.Context, start, end time.Time, limit, offset int, editLink bool, bufs *api.PageBuffers) (*api.SubmissionPage, error) {
	p := api.ListParams{Limit: limit, Offset: offset, Sort: api.SortAsc, IncludeEditLink: editLink, Buffers: bufs}
	if start.After(epoch) {
		after := start.Add(-time.Millisecond)
		p.AfterDate = &after
	}
	before := end
	p.BeforeDate = &before
	s.requests.Add(1)
	page, err := s.api.ListSubmissions(ctx, s.form, p)
	if err != nil {
		return nil, fmt.Errorf("list submissions of form %s in [%s, %s): %w", s.form, api.FormatTime(start), api.FormatTime(end), err)
	}
	return page, nil
}

// epoch stands for "the beginning of the form's history": no afterDate is sent.
var epoch = time.Unix(0, 0).UTC()

// Count is the total of one limit=1 page of [start, end).
func (s *Stream) Count(ctx context.Context, start, end time.Time) (int, error) {
	page, err := s.list(ctx, start, end, 1, 0, false, nil)
	if err != nil {
		return 0, err
	}
	return page.TotalResponses, nil
}

// Plan cuts the gap into windows of at most cut.MaxRows rows. Its first
// request is the first page of the gap, whose total tells how much the gap
// holds: an empty gap costs that one request, and a gap that fits one
// window (every incremental pass, every sparse form) is read from that page
// on, so planning costs nothing more. A larger gap is cut by counts (one
// limit=1 request each), at the start of a partition of the sink where one
// falls inside the window, so that a pass writes one file per partition
// unless one partition alone holds more than a batch.
func (s *Stream) Plan(ctx context.Context, gap state.Interval, cut poller.Cutter, emit func(poller.Window) error) error {
	a, b := gap.Start, gap.End
	for a.Before(b) {
		page, err := s.list(ctx, a, b, s.opts.PageSize, 0, s.opts.IncludeEditLink, nil)
		if err != nil {
			return err
		}
		if page.TotalResponses == 0 || len(page.Responses) == 0 {
			return emit(poller.Window{Start: a, End: b, Empty: true})
		}
		// Nothing lies before the gap's first submission: a form sparse for
		// years starts the search where its data does, and a new table's
		// layout follows the span its rows were seen in.
		lo := a
		for _, sub := range page.Responses {
			if t := sub.SubmissionTime.UTC().Truncate(time.Millisecond); !t.Before(a) && t.Before(b) {
				lo = t
				break
			}
		}
		if page.TotalResponses <= cut.MaxRows {
			return emit(poller.Window{Start: a, End: b, Count: page.TotalResponses, First: page, Since: lo})
		}
		end, count, err := cut.Split(a, lo, b, page.TotalResponses, func(t time.Time) (int, error) { return s.Count(ctx, a, t) })
		if err != nil {
			return err
		}
		if err := emit(cut.Window(a, end, count)); err != nil {
			return err
		}
		a = end
	}
	return nil
}

// Read puts every submission of w into rows, with its version in the
// version index.
func (s *Stream) Read(ctx context.Context, w poller.Window, rows *poller.Rows) error {
	bld := builderFor(rows)
	defer bld.Release()
	lin := rows.Lineage()
	_, err := s.fetch(ctx, w, func(sub *api.Submission) error {
		if rows.Opens(sub.SubmissionTime) {
			if err := cutChunk(bld, rows); err != nil {
				return err
			}
		}
		if err := bld.Append(sub, lin); err != nil {
			return err
		}
		rows.Index(entryOf(sub))
		if rows.Row(sub.SubmissionTime, estimatedSize(sub)) {
			return cutChunk(bld, rows)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return cutChunk(bld, rows)
}

// cutChunk hands the builder's rows to rows as one chunk; the builder keeps
// its evolved table for the next rows.
func cutChunk(bld *schema.Builder, rows *poller.Rows) error {
	rec, t, st := bld.Finish()
	defer rec.Release()
	return rows.Chunk(rec, Pinned{T: t}, st)
}

// entryOf is what the version index records of a submission: its time
// and a hash of its version (lastUpdatedAt, or its time if never updated).
func entryOf(sub *api.Submission) state.Entry {
	updated := sub.SubmissionTime
	if sub.LastUpdatedAt != nil {
		updated = *sub.LastUpdatedAt
	}
	// A copy of the id: the decoder's strings may share the page's buffer.
	return state.Entry{ID: strings.Clone(sub.SubmissionID), Version: state.Version{Time: sub.SubmissionTime, Hash: state.TimeVersion(updated)}}
}

// estimatedSize is about what a submission takes in Arrow memory: its
// answers' JSON text and a fixed part for the other columns.
func estimatedSize(sub *api.Submission) int {
	n := 256 + len(sub.SubmissionID)
	for _, q := range sub.Questions {
		n += len(q.Value)
	}
	for _, c := range sub.Calculations {
		n += len(c.Value)
	}
	for _, p := range sub.URLParameters {
		n += len(p.Value)
	}
	return n
}

// Reconcile reads the committed window w again and returns what changed
// since known: a submission whose version differs (an edit) or that known
// lacks (a late import) is a new version; one known lists and the API no
// longer does was deleted, and gets a tombstone seen at seen.
func (s *Stream) Reconcile(ctx context.Context, w poller.Window, known map[string]state.Version, seen time.Time) (poller.Changes, error) {
	var changed []api.Submission
	got, err := s.fetch(ctx, w, func(sub *api.Submission) error {
		if v, ok := known[sub.SubmissionID]; ok && v.Hash == entryOf(sub).Hash {
			return nil
		}
		// A clone: the page's submissions share its bytes, and a window's
		// changes must not keep every page they came from.
		changed = append(changed, sub.Clone())
		return nil
	})
	if err != nil {
		return poller.Changes{}, err
	}
	var gone []string
	for id := range known {
		if !got.Has(id) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	c := poller.Changes{Index: state.IndexChange{Put: make([]state.Entry, len(changed)), Gone: make([]state.Entry, len(gone))}}
	for i := range changed {
		c.Index.Put[i] = entryOf(&changed[i])
	}
	for i, id := range gone {
		c.Index.Gone[i] = state.Entry{ID: id, Version: known[id]}
	}
	c.Write = func(rows *poller.Rows) error {
		bld := builderFor(rows)
		defer bld.Release()
		lin := rows.Lineage()
		for i := range changed {
			if err := bld.Append(&changed[i], lin); err != nil {
				return fmt.Errorf("map submission %s of form %s: %w", changed[i].SubmissionID, s.form, err)
			}
			if rows.Row(changed[i].SubmissionTime, estimatedSize(&changed[i])) {
				if err := cutChunk(bld, rows); err != nil {
					return err
				}
			}
		}
		for _, id := range gone {
			t := known[id].Time
			if err := bld.AppendTombstone(id, t, seen, lin); err != nil {
				return err
			}
			if rows.Row(t, 256) {
				if err := cutChunk(bld, rows); err != nil {
					return err
				}
			}
		}
		return cutChunk(bld, rows)
	}
	return c, nil
}

// fetch pages through the window by offset in ascending order and calls
// visit once for every submission of exactly [start, end), dropping ids
// already seen; it returns the ids seen. Submissions imported or deleted
// inside the window while it is paged shift the offsets; a walk notices
// (see walk) and the window is walked again, keeping what it saw.
func (s *Stream) fetch(ctx context.Context, w poller.Window, visit func(*api.Submission) error) (*ids.Set, error) {
	seen := ids.NewSet(max(w.SizeHint(), 16))
	first, _ := w.First.(*api.SubmissionPage)
	for attempt := 0; ; attempt++ {
		changed, err := s.walk(ctx, w, first, seen, visit)
		if err != nil {
			return seen, err
		}
		if !changed {
			return seen, nil
		}
		if attempt >= s.opts.MaxRefetches {
			s.log.Warn("window kept changing while it was paged; committing what was seen (a later reconcile finds the rest)",
				zap.Time(logkey.WindowStart, w.Start), zap.Time(logkey.WindowEnd, w.End), zap.Int(logkey.Seen, seen.Len()))
			return seen, nil
		}
		s.log.Debug("window changed while it was paged; walking it again",
			zap.Time(logkey.WindowStart, w.Start), zap.Time(logkey.WindowEnd, w.End))
		first = nil
	}
}

// walk reads the window once, page after page. Each page after the first
// starts one submission back, on the last one of the page before: if that
// is not where the page starts, or the total moved, something was imported
// or deleted behind the offset, and walk reports the window changed. The
// overlap costs one row per page and makes a single deletion behind the
// offset harmless (no row is skipped); a deletion and an import behind the
// offset between the same two requests cancel out and stay unseen here
// (the reconcile of committed windows finds such an import).
func (s *Stream) walk(ctx context.Context, w poller.Window, first *api.SubmissionPage, seen *ids.Set, visit func(*api.Submission) error) (changed bool, err error) {
	limit := s.opts.PageSize
	total, last := -1, ""
	// One page's memory for the whole walk: visit copies what it keeps
	// (the builder its values, the index and seen their ids, a reconcile
	// its changed submissions) before the next page is read into it.
	var bufs api.PageBuffers
	for offset := 0; ; {
		page := first
		first = nil
		if page == nil {
			if page, err = s.list(ctx, w.Start, w.End, limit, offset, s.opts.IncludeEditLink, &bufs); err != nil {
				return false, err
			}
		}
		if offset > 0 && (len(page.Responses) == 0 || page.Responses[0].SubmissionID != last) {
			changed = true
		}
		if total >= 0 && page.TotalResponses != total {
			changed = true
		}
		total = page.TotalResponses
		for i := range page.Responses {
			sub := &page.Responses[i]
			if sub.SubmissionID == "" {
				return false, fmt.Errorf("list submissions of form %s: a submission without submissionId at offset %d", s.form, offset+i)
			}
			if !seen.Add(sub.SubmissionID) {
				continue
			}
			t := sub.SubmissionTime
			if t.Before(w.Start) || !t.Before(w.End) {
				continue
			}
			if err := visit(sub); err != nil {
				return false, fmt.Errorf("map submission %s of form %s: %w", sub.SubmissionID, s.form, err)
			}
		}
		n := len(page.Responses)
		if n < limit || offset+n >= page.TotalResponses {
			return changed, nil
		}
		last = page.Responses[n-1].SubmissionID
		offset += n - 1
	}
}
