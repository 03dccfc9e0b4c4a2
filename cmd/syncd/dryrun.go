package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
)

// dryRun plans d over the jobs of ids (every form when empty) and prints
// the plan (app.Reader.Plan). It opens the state read-only.
func (g *globals) dryRun(ctx context.Context, r *app.Reader, d app.DryRun, ids []string, format string) error {
	jobs, err := r.Jobs(ctx, ids)
	if err != nil {
		return withCode(exitFailed, err)
	}
	v, err := readState(ctx, r.Config(), "")
	if err != nil {
		return err
	}
	d.Jobs, d.State = jobs, v.Forms
	plan := r.Plan(ctx, d)
	if d.Command == "backfill" && len(ids) == 1 && d.To.After(plan.Horizon) {
		fmt.Fprintf(g.stderr, "syncd: --to %s is past now - sync.safety_lag; the backfill would stop at %s\n", d.To.Format(time.RFC3339), plan.Horizon.Format(time.RFC3339Nano))
	}
	if format == formatJSON {
		if err := printJSON(g.stdout, plan); err != nil {
			return err
		}
	} else {
		printDryRun(g.stdout, plan)
	}
	if plan.Failed() > 0 {
		return withCode(exitFailed, errReported)
	}
	return nil
}

// printDryRun writes the plan for a person.
func printDryRun(w io.Writer, p app.Plan) {
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
		printStreamPlan(w, "bookings", *b, " to the scheduling API")
	}
	for _, s := range p.Streams {
		printStreamPlan(w, "stream", s, "")
	}
}

// printStreamPlan writes the plan of a stream of a source other than the
// forms (kind: bookings, stream) on one line.
func printStreamPlan(w io.Writer, kind string, s app.StreamPlan, to string) {
	if s.Error != "" {
		fmt.Fprintf(w, "FAIL %s: %s\n", s.FormID, s.Error)
		return
	}
	fmt.Fprintf(w, "%s %s -> %s: %s in %s, about %s%s\n", kind, s.FormID, s.Table, plural(s.Rows, "row"),
		plural(int64(len(s.Windows)), "window"), plural(s.Requests, "request"), to)
}
