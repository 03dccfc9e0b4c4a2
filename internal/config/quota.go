package config

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// BigQueryLoadJobsPerTableDay is BigQuery's quota of load jobs per table
// per day, failed jobs included.
const BigQueryLoadJobsPerTableDay = 1500

// maxPassesCounted stops counting a day's passes early: past it, the exact
// number changes no decision.
const maxPassesCounted = 1_000_000

// PassesPerDay is the most passes a cron schedule (as sync.schedule takes
// it) starts within one UTC day, over the seven days from the UTC midnight
// after from: a weekday-only schedule counts its busiest day.
func PassesPerDay(spec string, from time.Time) (int, error) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, fmt.Errorf("schedule %q: %w", spec, err)
	}
	day := from.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	most := 0
	for range 7 {
		next := day.Add(24 * time.Hour)
		n := 0
		// Next is strictly after its argument: start a nanosecond early so
		// that a pass at midnight counts.
		for t := sched.Next(day.Add(-time.Nanosecond)); !t.IsZero() && t.Before(next) && n < maxPassesCounted; t = sched.Next(t) {
			n++
		}
		most = max(most, n)
		day = next
	}
	return most, nil
}

// QuotaWarnings are the schedules of a BigQuery configuration that would
// start more passes a day than a table takes load jobs: each pass loads up
// to one job per form table (more after failures, which count too). One
// sentence per schedule; none for other sinks.
func (c *Config) QuotaWarnings(now time.Time) []string {
	if c.Sink.Type != "bigquery" {
		return nil
	}
	type use struct{ key, spec string }
	uses := []use{}
	if len(c.Forms) == 0 {
		uses = append(uses, use{"sync.schedule", c.Sync.Schedule})
	}
	for i, f := range c.Forms {
		if f.Schedule != "" {
			uses = append(uses, use{fmt.Sprintf("forms[%d].schedule (form %s)", i, f.ID), f.Schedule})
		} else {
			uses = append(uses, use{fmt.Sprintf("sync.schedule (form %s)", f.ID), c.Sync.Schedule})
		}
	}
	var out []string
	for _, u := range uses {
		n, err := PassesPerDay(u.spec, now)
		if err != nil {
			continue // validation reports a bad schedule
		}
		if n > BigQueryLoadJobsPerTableDay {
			out = append(out, fmt.Sprintf("%s %q starts %d passes a UTC day and each loads up to one BigQuery job per form table, but a table takes at most %d load jobs a day (failed ones included): sync less often, e.g. \"*/5 * * * *\" (288 a day)",
				u.key, u.spec, n, BigQueryLoadJobsPerTableDay))
		}
	}
	return out
}
