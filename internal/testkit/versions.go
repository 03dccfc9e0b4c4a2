package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/sink"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// LatestView runs the documented query of a form's table's current state
// (sink.LatestQuery: the latest version of each submission, tombstones
// dropped) and returns submission id -> last_updated_at (µs) of the rows
// whose submission time is at or after from.
func (d *Duck) LatestView(t testing.TB, out, table string, from time.Time) map[string]int64 {
	t.Helper()
	q := `SELECT submission_id, epoch_us(last_updated_at) FROM (` + sink.LatestQuery(Scan(out, table), "submission_id", "last_updated_at") + `)
	WHERE submission_time >= make_timestamp(?)`
	rows, err := d.DB.Query(q, from.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var us int64
		if err := rows.Scan(&id, &us); err != nil {
			t.Fatal(err)
		}
		got[id] = us
	}
	return got
}

// DuplicateVersions counts the versions (submission id, last_updated_at,
// tombstone or not) a table holds more than once: exactly once means 0.
func (d *Duck) DuplicateVersions(t testing.TB, out, table string) int {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM (SELECT submission_id, last_updated_at, _deleted FROM ` + Scan(out, table) + ` GROUP BY ALL HAVING count(*) > 1)`
	if err := d.DB.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ServiceVersions is what the simulator lists now, through the API:
// submission id -> lastUpdatedAt (µs) of the submissions whose time is at
// or after from.
func ServiceVersions(t testing.TB, sim *Sim, form string, from time.Time) map[string]int64 {
	t.Helper()
	client, err := forms.New(forms.Config{BaseURL: sim.BaseURL, APIKey: APIKey, RateLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	after := from
	for offset := 0; ; offset += forms.MaxListLimit {
		page, err := client.ListSubmissions(context.Background(), form, forms.ListParams{Limit: forms.MaxListLimit, Offset: offset, AfterDate: &after, Sort: forms.SortAsc})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Responses {
			if !s.SubmissionTime.Before(from) && s.LastUpdatedAt != nil {
				want[s.SubmissionID] = s.LastUpdatedAt.UnixMicro()
			}
		}
		if len(page.Responses) < forms.MaxListLimit {
			return want
		}
	}
}

// CheckLatestView compares a latest view with the service's versions,
// naming up to five differences.
func CheckLatestView(t testing.TB, got, want map[string]int64) {
	t.Helper()
	bad := 0
	note := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	for id, us := range want {
		if g, ok := got[id]; !ok {
			note("submission %s (last updated %d) is not in the latest view", id, us)
		} else if g != us {
			note("submission %s: the latest view has version %d, the service %d", id, g, us)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			note("the latest view holds %s, which the service no longer lists", id)
		}
	}
	if bad > 0 {
		t.Errorf("%d submissions differ between the latest view and the service", bad)
	}
}
