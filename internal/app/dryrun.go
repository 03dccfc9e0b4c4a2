package app

import (
	"context"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
)

// A dry run plans a pass with the poller's own planner, reading only: the
// state (read-only, or from the running daemon; a missing state is empty
// and is not created), and the requests planning makes (the first page of
// each gap, counts where a gap holds more than a batch). It writes nothing.
// What reading each planned window takes is the source's estimate
// (source.Estimator).

// bookingsSource is the source whose one stream a plan reports as its
// Bookings: the field is older than the other sources' Streams.
const bookingsSource = "scheduling"

// Plan is what `--dry-run -o json` prints.
type Plan struct {
	Command   string       `json:"command"` // once or backfill
	Forms     []StreamPlan `json:"forms"`
	Rows      int64        `json:"rows"`               // submissions the pass would fetch
	Requests  int64        `json:"estimated_requests"` // the pass's requests, counts and account checks included
	RateLimit float64      `json:"rate_limit"`         // source.rate_limit, requests per second
	Seconds   float64      `json:"estimated_seconds"`  // Requests / RateLimit: the least the pass takes
	Asked     int64        `json:"requests_made"`      // requests this dry run made (counts and metadata)
	Horizon   time.Time    `json:"horizon"`            // now - sync.safety_lag: nothing is planned past it
	// Bookings is the scheduling API's bookings, planned the same way (null
	// without a scheduling section, or for a backfill); its requests go to
	// that API, at scheduling.rate_limit, and are not in Requests.
	Bookings *StreamPlan `json:"bookings"`
	// Streams are the streams of the account's other sources, planned the
	// same way (left out when there are none); their requests go to their
	// own services, and are not in Requests.
	Streams []StreamPlan `json:"streams,omitempty"`
}

// StreamPlan is the plan of one stream: a form's, or another source's.
type StreamPlan struct {
	FormID   string       `json:"form_id"`
	Table    string       `json:"table"`
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Windows  []WindowPlan `json:"windows"`
	Rows     int64        `json:"rows"`
	Requests int64        `json:"estimated_requests"`
	Error    string       `json:"error"` // the pass of this stream would fail with it; "" when it would not
}

// WindowPlan is a window the pass would fetch.
type WindowPlan struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Rows     int       `json:"rows"`
	Requests int64     `json:"estimated_requests"` // pages still to read (a form's pages overlap by one row)
	Open     bool      `json:"open_batch"`
}

// Failed is how many streams of the plan would fail.
func (p Plan) Failed() int {
	n := 0
	for _, f := range p.Forms {
		if f.Error != "" {
			n++
		}
	}
	if p.Bookings != nil && p.Bookings.Error != "" {
		n++
	}
	for _, s := range p.Streams {
		if s.Error != "" {
			n++
		}
	}
	return n
}

// DryRun is what a dry run plans.
type DryRun struct {
	Command string       // once or backfill
	Jobs    []poller.Job // the forms (Reader.Jobs)
	// From and To bound the range; zero: each stream's start, and now -
	// sync.safety_lag (a later To is cut there).
	From, To time.Time
	// Others plans the streams of the account's other sources too (the
	// bookings), from their start.
	Others bool
	// State is the state's view of the streams (status.View.Forms).
	State []status.Form
}

// planner plans the streams of one account at one instant.
type planner struct {
	r      *Reader
	now    time.Time
	states map[string]status.Form
	asked  int64 // requests planning made, beyond the account's
}

// Plan plans d: the forms of d.Jobs and, with d.Others, the streams of the
// account's other sources. A stream that would fail carries its error.
func (r *Reader) Plan(ctx context.Context, d DryRun) Plan {
	pl := &planner{r: r, now: time.Now(), states: map[string]status.Form{}}
	for _, f := range d.State {
		pl.states[f.Stream] = f
	}
	// The form checks and the account's form list: the real pass makes them too.
	account := r.requests.n.Load()
	horizon := pl.horizon()
	p := Plan{Command: d.Command, Forms: make([]StreamPlan, 0, len(d.Jobs)), Requests: account, RateLimit: r.cfg.Source.RateLimit, Horizon: horizon}
	for _, job := range d.Jobs {
		f := pl.planStream(ctx, r.forms, source.Stream{Stream: r.forms.JobStream(job), Start: job.Start}, d.From, d.To)
		p.Rows += f.Rows
		p.Requests += f.Requests
		p.Forms = append(p.Forms, f)
	}
	if p.RateLimit > 0 {
		p.Seconds = math.Round(float64(p.Requests)/p.RateLimit*10) / 10
	}
	if d.Others {
		for _, src := range sourceList() {
			if src.Name() == poller.SourceForms {
				continue // planned above
			}
			for _, s := range pl.planSource(ctx, src) {
				if src.Name() == bookingsSource {
					p.Bookings = &s
				} else {
					p.Streams = append(p.Streams, s)
				}
			}
		}
	}
	p.Asked = account + pl.asked
	return p
}

func (pl *planner) horizon() time.Time {
	return pl.now.Add(-pl.r.cfg.Sync.SafetyLag.D()).UTC().Truncate(time.Millisecond)
}

// planSource plans the streams of one listed source the account uses,
// opened to read only (readSource), from their start.
func (pl *planner) planSource(ctx context.Context, src source.Source) []StreamPlan {
	acct, signIn, err := pl.readSource(ctx, src)
	if acct == nil && err == nil {
		return nil // the account does not use it
	}
	var streams []source.Stream
	if err == nil {
		streams, err = acct.Streams(ctx)
	}
	if err != nil {
		return []StreamPlan{{FormID: src.Name(), Windows: []WindowPlan{}, Error: err.Error()}}
	}
	out := make([]StreamPlan, 0, len(streams))
	for _, s := range streams {
		// A damaged stream says so first: the pass fails on it whatever
		// the sign-in.
		if signIn != nil && pl.states[s.Key()].Damaged == "" {
			f := StreamPlan{FormID: pl.id(s.Key()), Table: s.Table(), From: s.Start, To: pl.horizon(), Windows: []WindowPlan{}, Error: signIn.Error()}
			if f.From.IsZero() {
				f.From = time.Unix(0, 0).UTC()
			}
			out = append(out, f)
			continue
		}
		out = append(out, pl.planStream(ctx, acct, s, time.Time{}, time.Time{}))
	}
	return out
}

// readSource opens a listed source for the account to read only
// (source.ReadOnly); signIn says why its streams cannot be planned: a
// sign-in that cannot be used without refreshing it (the source's
// SignIn), since the dry run writes nothing to keep a new one.
func (pl *planner) readSource(ctx context.Context, src source.Source) (acct source.Account, signIn, err error) {
	acct, err = openReadOnly(ctx, src, pl.r.env(zap.NewNop()))
	if acct == nil || err != nil {
		return nil, nil, err
	}
	if s, ok := acct.(source.SignIn); ok {
		signIn = s.SignIn(ctx)
	}
	return acct, signIn, nil
}

// id is how the plan names a stream: its key, without the account's
// namespace.
func (pl *planner) id(key string) string {
	if ns := pl.r.acct.Namespace(); ns != "" {
		return strings.TrimPrefix(key, ns+"/")
	}
	return key
}

// planStream plans [from, to) of stream s of acct (zero: from the
// stream's start, to the horizon): the open batches of an earlier run,
// then the gaps in what the state has committed, cut as the pass would cut
// them, each estimated by the source.
func (pl *planner) planStream(ctx context.Context, acct source.Account, s source.Stream, from, to time.Time) StreamPlan {
	f := StreamPlan{FormID: pl.id(s.Key()), Table: s.Table(), Windows: []WindowPlan{}}
	st := pl.states[s.Key()]
	if st.Damaged != "" {
		f.Error = st.Damaged
		return f
	}
	if from.IsZero() {
		from = s.Start
	}
	if horizon := pl.horizon(); to.IsZero() || to.After(horizon) {
		to = horizon
	}
	epoch := time.Unix(0, 0).UTC()
	if from.Before(epoch) || from.IsZero() {
		from = epoch
	}
	from, to = from.UTC().Truncate(time.Millisecond), to.UTC().Truncate(time.Millisecond)
	f.From, f.To = from, to
	before := s.Requests()
	defer func() { pl.asked += s.Requests() - before }()
	est, _ := acct.(source.Estimator)
	// Open batches of an earlier run are fetched again (when the sink
	// lacks them); their count is one request more.
	for _, ob := range st.OpenBatches {
		if err := pl.estimate(ctx, est, s, poller.PlannedWindow{Start: ob.Start, End: ob.End, Rows: -1}, true, &f); err != nil {
			f.Error = err.Error()
			return f
		}
	}
	if from.Before(to) {
		var committed state.Intervals
		for _, w := range st.Committed {
			committed = committed.Add(state.Interval{Start: w.Start, End: w.End})
		}
		for _, g := range committed.Gaps(state.Interval{Start: from, End: to}) {
			if err := pl.planGap(ctx, est, s, sink.Layout(st.Layout), g, &f); err != nil {
				f.Error = err.Error()
				return f
			}
		}
	}
	if _, ok := s.Stream.(poller.Evolver); ok && len(f.Windows) > 0 {
		f.Requests++ // the table's metadata (a form's), read once per pass
	}
	return f
}

// planGap plans gap g with the poller's own planner, counting its
// requests in f: they are the pass's too. layout is the table's, as the
// state records it ("": a new table's, chosen as the pass would).
func (pl *planner) planGap(ctx context.Context, est source.Estimator, s source.Stream, layout sink.Layout, g state.Interval, f *StreamPlan) error {
	before := s.Requests()
	windows, _, err := poller.Plan(ctx, s.Stream, pl.options(), FilesOutput(pl.r.cfg), layout, []state.Interval{g})
	f.Requests += s.Requests() - before
	if err != nil {
		return err
	}
	for _, w := range windows {
		if w.Empty {
			continue // committed without a read: nothing to fetch
		}
		if err := pl.estimate(ctx, est, s, w, false, f); err != nil {
			return err
		}
	}
	return nil
}

// estimate adds window w, as the source estimates it, to f. A source that
// cannot estimate reads a window in one request, of the records planning
// counted.
func (pl *planner) estimate(ctx context.Context, est source.Estimator, s source.Stream, w poller.PlannedWindow, open bool, f *StreamPlan) error {
	e := source.Estimate{Records: w.Rows, Requests: 1}
	if est != nil {
		var err error
		if e, err = est.Estimate(ctx, s, w); err != nil {
			return err
		}
	}
	f.Requests += int64(e.Requests)
	f.Rows += int64(e.Records)
	f.Windows = append(f.Windows, WindowPlan{Start: w.Start, End: w.End, Rows: e.Records, Requests: int64(e.Requests), Open: open})
	return nil
}

// options are the poller's options a pass would plan with.
func (pl *planner) options() poller.Options {
	cfg := pl.r.cfg
	return poller.Options{MaxRowsPerBatch: cfg.Sync.MaxRowsPerBatch, SafetyLag: cfg.Sync.SafetyLag.D(), Now: func() time.Time { return pl.now },
		Layout: sink.Layout(cfg.Sink.Parquet.Partition)}
}
