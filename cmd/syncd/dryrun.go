package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/state"
)

// A dry run plans a pass with the poller's own planner, reading only: the
// state (read-only, or from the running daemon; a missing state is empty
// and is not created), and the requests planning makes (the first page of
// each gap, counts where a gap holds more than a batch). It writes nothing.

// dryRunPlan is what `--dry-run -o json` prints.
type dryRunPlan struct {
	Command   string       `json:"command"` // once or backfill
	Forms     []dryRunForm `json:"forms"`
	Rows      int64        `json:"rows"`               // submissions the pass would fetch
	Requests  int64        `json:"estimated_requests"` // the pass's requests, counts and account checks included
	RateLimit float64      `json:"rate_limit"`         // source.rate_limit, requests per second
	Seconds   float64      `json:"estimated_seconds"`  // Requests / RateLimit: the least the pass takes
	Asked     int64        `json:"requests_made"`      // requests this dry run made (counts and metadata)
	Horizon   time.Time    `json:"horizon"`            // now - sync.safety_lag: nothing is planned past it
	// Bookings is the scheduling API's bookings, planned the same way (null
	// without a scheduling section, or for a backfill); its requests go to
	// that API, at scheduling.rate_limit, and are not in Requests.
	Bookings *dryRunForm   `json:"bookings"`
	Took     time.Duration `json:"-"`
}

type dryRunForm struct {
	FormID   string         `json:"form_id"`
	Table    string         `json:"table"`
	From     time.Time      `json:"from"`
	To       time.Time      `json:"to"`
	Windows  []dryRunWindow `json:"windows"`
	Rows     int64          `json:"rows"`
	Requests int64          `json:"estimated_requests"`
	Error    string         `json:"error"` // the pass of this form would fail with it; "" when it would not
}

type dryRunWindow struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Rows     int       `json:"rows"`
	Requests int64     `json:"estimated_requests"` // pages of page_size still to read (pages overlap by one row)
	Open     bool      `json:"open_batch"`
}

// dryRunner plans with a client whose requests it counts.
type dryRunner struct {
	cfg    *config.Config
	client *forms.Client
	now    time.Time
	asked  int64
}

func newDryRunner(cfg *config.Config, client *forms.Client) *dryRunner {
	return &dryRunner{cfg: cfg, client: client, now: time.Now()}
}

func (d *dryRunner) horizon() time.Time {
	return d.now.Add(-d.cfg.Sync.SafetyLag.D()).UTC().Truncate(time.Millisecond)
}

// count is the number of submissions in [a, b) and the time of the first,
// with one limit=1 request, as the poller asks.
func (d *dryRunner) count(ctx context.Context, formID string, a, b time.Time) (int, time.Time, error) {
	p := forms.ListParams{Limit: 1, Sort: forms.SortAsc}
	if a.After(time.Unix(0, 0)) {
		after := a.Add(-time.Millisecond)
		p.AfterDate = &after
	}
	p.BeforeDate = &b
	d.asked++
	page, err := d.client.ListSubmissions(ctx, formID, p)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count submissions of form %s: %w", formID, err)
	}
	if page.TotalResponses == 0 || len(page.Responses) == 0 || !page.Responses[0].SubmissionTime.Before(b) {
		return 0, time.Time{}, nil
	}
	return page.TotalResponses, page.Responses[0].SubmissionTime.UTC().Truncate(time.Millisecond), nil
}

// planForm plans [from, to) of one form whose state is st.
func (d *dryRunner) planForm(ctx context.Context, job poller.Job, st formView, from, to time.Time) dryRunForm {
	f := dryRunForm{FormID: job.Stream, Table: job.Table, Windows: []dryRunWindow{}}
	if f.Table == "" {
		f.Table = poller.DefaultTable(job.Stream)
	}
	if st.Damaged != "" {
		f.Error = st.Damaged
		return f
	}
	epoch := time.Unix(0, 0).UTC()
	if from.Before(epoch) || from.IsZero() {
		from = epoch
	}
	from, to = from.UTC().Truncate(time.Millisecond), to.UTC().Truncate(time.Millisecond)
	f.From, f.To = from, to
	var committed state.Intervals
	for _, w := range st.Committed {
		committed = committed.Add(state.Interval{Start: w.Start, End: w.End})
	}
	emit := func(w dryRunWindow) {
		f.Requests += w.Requests
		f.Rows += int64(w.Rows)
		f.Windows = append(f.Windows, w)
	}
	// Open batches of an earlier run are fetched again (when the sink
	// lacks them); their count is one request more.
	for _, ob := range st.OpenBatches {
		n, _, err := d.count(ctx, job.Stream, ob.Start, ob.End)
		if err != nil {
			f.Error = err.Error()
			return f
		}
		emit(dryRunWindow{Start: ob.Start, End: ob.End, Rows: n, Open: true, Requests: poller.PagesFor(n, d.pageSize(), false)})
	}
	if from.Before(to) {
		for _, g := range committed.Gaps(state.Interval{Start: from, End: to}) {
			if err := d.planGap(ctx, job.Stream, sink.Layout(st.Layout), g.Start, g.End, &f.Requests, emit); err != nil {
				f.Error = err.Error()
				return f
			}
		}
	}
	if len(f.Windows) > 0 {
		f.Requests++ // the form's metadata, read once per pass
	}
	return f
}

// planGap plans [a, b) with the poller's own planner, counting its
// requests in *requests: they are the pass's too. layout is the table's,
// as the state records it ("": a new table's, chosen as the pass would).
func (d *dryRunner) planGap(ctx context.Context, formID string, layout sink.Layout, a, b time.Time, requests *int64, emit func(dryRunWindow)) error {
	s := app.FormStream(d.cfg, d.client, poller.Job{Stream: formID}, zap.NewNop())
	windows, _, err := poller.Plan(ctx, s, d.planOptions(), d.parted(), layout, []state.Interval{{Start: a, End: b}})
	*requests += s.Requests()
	d.asked += s.Requests()
	if err != nil {
		return err
	}
	for _, w := range windows {
		if w.Empty {
			continue // committed without a read: nothing to fetch
		}
		rows := w.Rows
		if rows < 0 {
			// The pass learns it from the window's first page; the dry run
			// asks for the count (a request the pass does not make).
			n, _, err := d.count(ctx, formID, w.Start, w.End)
			if err != nil {
				return err
			}
			rows = n
		}
		emit(dryRunWindow{Start: w.Start, End: w.End, Rows: rows, Requests: poller.PagesFor(rows, d.pageSize(), w.FirstRead)})
	}
	return nil
}

// parted says the configured sink writes a file per partition (windows
// are cut at partition starts): Parquet, not BigQuery.
func (d *dryRunner) parted() bool { return app.FilesOutput(d.cfg) }

// planOptions are the poller's options a pass would plan with.
func (d *dryRunner) planOptions() poller.Options {
	return poller.Options{MaxRowsPerBatch: d.cfg.Sync.MaxRowsPerBatch, SafetyLag: d.cfg.Sync.SafetyLag.D(), Now: func() time.Time { return d.now },
		Layout: sink.Layout(d.cfg.Sink.Parquet.Partition)}
}

func (d *dryRunner) pageSize() int {
	if size := d.cfg.Sync.PageSize; size > 0 && size <= 150 {
		return size
	}
	return 150
}

// finish totals the plan; account is the requests the command makes
// before any form (the account's form list).
func (d *dryRunner) finish(command string, list []dryRunForm, account int64) dryRunPlan {
	p := dryRunPlan{Command: command, Forms: list, Requests: account, RateLimit: d.cfg.Source.RateLimit, Horizon: d.horizon()}
	for _, f := range list {
		p.Rows += f.Rows
		p.Requests += f.Requests
	}
	if p.RateLimit > 0 {
		p.Seconds = math.Round(float64(p.Requests)/p.RateLimit*10) / 10
	}
	p.Asked = account + d.asked
	return p
}

// printDryRun writes the plan for a person.
func printDryRun(w io.Writer, p dryRunPlan) {
	fmt.Fprintf(w, "DRY RUN of syncd %s: nothing is written (no output, no state)\n", p.Command)
	for _, f := range p.Forms {
		if f.Error != "" {
			fmt.Fprintf(w, "FAIL %s: %s\n", f.FormID, f.Error)
			continue
		}
		if len(f.Windows) == 0 {
			fmt.Fprintf(w, "form %s -> %s: nothing to fetch in [%s, %s)\n", f.FormID, f.Table, fmtTime(f.From), fmtTime(f.To))
			continue
		}
		fmt.Fprintf(w, "form %s -> %s: %s in %s, about %s\n", f.FormID, f.Table, plural(f.Rows, "row"),
			plural(int64(len(f.Windows)), "window"), plural(f.Requests, "request"))
		for _, win := range f.Windows {
			open := ""
			if win.Open {
				open = " (open batch of an earlier run)"
			}
			fmt.Fprintf(w, "  window [%s, %s): %s, %s%s\n", fmtTime(win.Start), fmtTime(win.End), plural(int64(win.Rows), "row"),
				plural(win.Requests, "request"), open)
		}
	}
	fmt.Fprintf(w, "%s, %s, about %s: at least %s at source.rate_limit %g/s\n", plural(int64(len(p.Forms)), "form"), plural(p.Rows, "row"),
		plural(p.Requests, "request"), (time.Duration(p.Seconds * float64(time.Second))).Round(100*time.Millisecond), p.RateLimit)
	if b := p.Bookings; b != nil {
		if b.Error != "" {
			fmt.Fprintf(w, "FAIL %s: %s\n", b.FormID, b.Error)
			return
		}
		fmt.Fprintf(w, "bookings %s -> %s: %s in %s, about %s to the scheduling API\n", b.FormID, b.Table, plural(b.Rows, "row"),
			plural(int64(len(b.Windows)), "window"), plural(b.Requests, "request"))
	}
}

// storedToken hands out the stored access token as it is: a dry run never
// refreshes, since a refresh rotates the sign-in and the dry run writes
// nothing to keep the new one.
type storedToken struct{ tok oauth.Token }

func (s storedToken) Token(context.Context) (oauth.Token, error) { return s.tok, nil }
func (storedToken) Invalidate(string)                            {}

// planBookings plans the bookings' gaps of [from, to) with the engine's own
// planner (by counts), as a pass would, reading only. st is the bookings'
// state.
func (d *dryRunner) planBookings(ctx context.Context, st formView, from, to time.Time) *dryRunForm {
	s := d.cfg.Scheduling
	f := &dryRunForm{FormID: scheduling.StreamKey, Table: s.Bookings.Table, From: from, To: to, Windows: []dryRunWindow{}}
	if st.Damaged != "" {
		f.Error = st.Damaged
		return f
	}
	store, err := app.OpenStore(ctx, d.cfg, true)
	if err != nil {
		f.Error = fmt.Sprintf("not planned: the sign-in cannot be read (%v)", err)
		return f
	}
	tok, err := (app.StateTokens{Store: store}).Load(ctx)
	store.Close()
	switch {
	case errors.Is(err, oauth.ErrNoToken):
		f.Error = "not signed in: run `syncd auth login`"
		return f
	case err != nil:
		f.Error = err.Error()
		return f
	case !tok.Fresh(d.now, time.Minute):
		f.Error = "not planned: the access token has expired, and a dry run does not refresh it (that would rotate the sign-in without keeping it); the pass refreshes it"
		return f
	}
	counter := &scheduling.Counter{}
	client, err := app.NewSchedulingClient(d.cfg, storedToken{tok}, zap.NewNop(), counter)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	stream := scheduling.NewStream(client, s.Bookings.Table, nil, counter)
	var committed state.Intervals
	for _, w := range st.Committed {
		committed = committed.Add(state.Interval{Start: w.Start, End: w.End})
	}
	windows, _, err := poller.Plan(ctx, stream, d.planOptions(), d.parted(), sink.Layout(st.Layout), committed.Gaps(state.Interval{Start: from, End: to}))
	f.Requests += stream.Requests() // the counts: the pass makes them too
	d.asked += stream.Requests()
	if err != nil {
		f.Error = err.Error()
		return f
	}
	for _, w := range windows {
		// Read walks the window twice (by update, and the bookings never
		// updated by creation), pages of scheduling.MaxTake each.
		reqs := 2 * int64(w.Rows/scheduling.MaxTake+1)
		f.Windows = append(f.Windows, dryRunWindow{Start: w.Start, End: w.End, Rows: w.Rows, Requests: reqs})
		f.Rows += int64(w.Rows)
		f.Requests += reqs
	}
	return f
}
