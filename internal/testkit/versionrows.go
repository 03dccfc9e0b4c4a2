package testkit

import (
	"context"
	"testing"

	"github.com/syncd-dev/syncd/internal/formsim"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// VersionRow is one row of a forms table as a judge of versions sees it:
// which submission, which version of it, and whether it is a tombstone.
// Times are Unix microseconds.
type VersionRow struct {
	ID       string
	Time     int64  // submission_time
	Updated  int64  // last_updated_at: the version (a tombstone's is when the deletion was seen)
	SyncedAt int64  // _synced_at: the latest view's tie-break
	Deleted  bool   // _deleted
	Batch    string // _batch_id
}

// VersionRows returns every row of a table: (submission_id,
// submission_time, last_updated_at, _synced_at, _deleted, _batch_id). A table with no
// file yet has none.
func (d *Duck) VersionRows(t testing.TB, root, table string) []VersionRow {
	t.Helper()
	if !HasFiles(root, table) {
		return nil
	}
	rows, err := d.DB.Query(`SELECT submission_id, epoch_us(submission_time), epoch_us(last_updated_at), epoch_us(_synced_at), COALESCE(_deleted, FALSE), _batch_id FROM ` + Scan(root, table))
	if err != nil {
		t.Fatalf("read versions of table %s: %v", table, err)
	}
	defer rows.Close()
	var out []VersionRow
	for rows.Next() {
		var r VersionRow
		if err := rows.Scan(&r.ID, &r.Time, &r.Updated, &r.SyncedAt, &r.Deleted, &r.Batch); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// SimVersion is one submission as the service lists it: its time and its
// version (lastUpdatedAt), Unix microseconds.
type SimVersion struct{ Time, Updated int64 }

// SimVersions is what the simulator holds of a form right now, read
// through the API with the simulator's faults off for the read (they are
// put back after): submission id -> time and version. It asks with
// includePreview=true, which syncd never does, so that the simulator's
// journal does not take these pages for a client's walk (and no change
// fault fires on them); preview submissions are therefore in the map too,
// and a caller keeps the finished ones (the journal's Subs).
func SimVersions(t testing.TB, sim *Sim, form string) map[string]SimVersion {
	t.Helper()
	faults := sim.Faults()
	sim.SetFaults(formsim.Faults{})
	defer sim.SetFaults(faults)
	client, err := forms.New(forms.Config{BaseURL: sim.BaseURL, APIKey: APIKey, RateLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]SimVersion{}
	for offset := 0; ; offset += forms.MaxListLimit - 1 {
		page, err := client.ListSubmissions(context.Background(), form, forms.ListParams{Limit: forms.MaxListLimit, Offset: offset, IncludePreview: true, Sort: forms.SortAsc})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Responses {
			updated := s.SubmissionTime
			if s.LastUpdatedAt != nil {
				updated = *s.LastUpdatedAt
			}
			out[s.SubmissionID] = SimVersion{Time: s.SubmissionTime.UnixMicro(), Updated: updated.UnixMicro()}
		}
		if len(page.Responses) < forms.MaxListLimit || offset+len(page.Responses) >= page.TotalResponses {
			return out
		}
	}
}
