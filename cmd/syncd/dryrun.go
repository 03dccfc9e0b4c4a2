package main

import (
	"context"
	"fmt"
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
	if err := g.emit(format, plan, noErr(plan.WriteText)); err != nil {
		return err
	}
	if plan.Failed() > 0 {
		return withCode(exitFailed, errReported)
	}
	return nil
}
