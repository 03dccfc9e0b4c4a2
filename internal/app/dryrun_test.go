package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestReaderPlansEveryFormAndRefusesBadIDs: the dry run plans each form's
// submissions through the engine's planner and the forms' estimates, a
// damaged stream carries its error, and Select tells a refused id from a
// failure to ask.
func TestReaderPlansEveryFormAndRefusesBadIDs(t *testing.T) {
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: 7, Forms: 2, Submissions: 500, Start: end.AddDate(0, 0, -2), End: end})
	ids := sim.FormIDs()
	cfg := accountsConfig(t, t.TempDir(), sim.BaseURL, "  max_rows_per_batch: 200\n", fmt.Sprintf("  - {name: acme, api_key: \"${KEY}\", exclude: [%s]}\n", ids[1]))
	ctx := context.Background()
	r, err := OpenReader(ctx, cfg, cfg.AccountList()[0], zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Select(ctx, []string{ids[1]}); !IsBadID(err) {
		t.Errorf("Select of an excluded form = %v, want an id refused", err)
	}
	if err := r.Select(ctx, []string{ids[0][:len(ids[0])-1] + "Q"}); !IsBadID(err) {
		t.Errorf("Select of a typo = %v, want an id refused", err)
	}
	jobs, err := r.Jobs(ctx, nil)
	if err != nil || len(jobs) != 1 || jobs[0].Stream != ids[0] {
		t.Fatalf("Jobs = %v, %v; want %s alone", jobs, err, ids[0])
	}
	p := r.Plan(ctx, DryRun{Command: "once", Jobs: jobs, Others: true})
	f := p.Forms[0]
	if want := int64(len(sim.ExpectedIDs(ids[0]))); f.FormID != ids[0] || f.Rows != want || len(f.Windows) < 3 || p.Failed() != 0 || p.Bookings != nil {
		t.Errorf("plan of %s: %d rows in %d windows, want %d rows in windows of at most 200: %+v", ids[0], f.Rows, len(f.Windows), want, p)
	}
	if p.Asked < 1 || p.Requests < f.Requests {
		t.Errorf("plan: %d requests made, %d estimated, %d of them the form's", p.Asked, p.Requests, f.Requests)
	}
	damaged := r.Plan(ctx, DryRun{Command: "once", Jobs: jobs, State: []status.Form{{Stream: "acme/" + ids[0], Damaged: "broken"}}})
	if damaged.Failed() != 1 || damaged.Forms[0].Error != "broken" {
		t.Errorf("plan of a damaged stream: %+v", damaged.Forms)
	}
}
