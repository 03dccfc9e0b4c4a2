package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// debugMissing writes, into SYNCD_CHAOS_DEBUG_DIR, what tells why a
// submission the judge expects is missing (or one it did not expect was
// written): for each submission of the committed windows not in the
// output, the pages that covered its time and the rows and submissions
// near it; every page of the form, the bucket's objects, the state file,
// the config, every run's output, and what judge read (judged.json: the
// journal with every page served, the committed windows and the rows).
func (r *roundRun) debugMissing(form string, j formsim.FormJournal, covered state.Intervals, got map[string]int, rows []testkit.VersionRow) {
	dir := os.Getenv("SYNCD_CHAOS_DEBUG_DIR")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, fmt.Sprintf("round%03d-%s-%d", r.round, form, time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Log(err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "form %s round %d covered %v\n", form, r.round, covered)
	for _, s := range j.Subs {
		if got[s.ID] > 0 || !contains(covered, s.Time) {
			continue
		}
		fmt.Fprintf(&b, "\nsub %s time %s created %d deleted %d\n", s.ID, s.Time.Format(time.RFC3339Nano), s.Created, s.Deleted)
		for _, p := range j.Pages {
			if !p.Covers(s.Time) {
				continue
			}
			in := false
			for _, id := range p.IDs {
				if id == s.ID {
					in = true
				}
			}
			fmt.Fprintf(&b, "  page seq %d epoch %d [%s, %s) limit %d offset %d n %d has %t first %s last %s\n", p.Seq, p.Epoch,
				p.From.Format(time.RFC3339Nano), p.To.Format(time.RFC3339Nano), p.Limit, p.Offset, len(p.IDs), in, first(p.IDs), lastOf(p.IDs))
		}
		fmt.Fprintf(&b, "  rows within 3h:\n")
		var near []testkit.VersionRow
		for _, row := range rows {
			if d := time.UnixMicro(row.Time).Sub(s.Time); d > -3*time.Hour && d < 3*time.Hour {
				near = append(near, row)
			}
		}
		sort.Slice(near, func(a, c int) bool { return near[a].Time < near[c].Time })
		for _, row := range near {
			fmt.Fprintf(&b, "    %s %s batch %s del %t\n", us(row.Time), row.ID, row.Batch, row.Deleted)
		}
		fmt.Fprintf(&b, "  subs within 3h:\n")
		for _, o := range j.Subs {
			if d := o.Time.Sub(s.Time); d > -3*time.Hour && d < 3*time.Hour {
				fmt.Fprintf(&b, "    %s %s created %d deleted %d got %d\n", o.Time.Format(time.RFC3339Nano), o.ID, o.Created, o.Deleted, got[o.ID])
			}
		}
	}
	fmt.Fprintf(&b, "\nall pages of the form:\n")
	for _, p := range j.Pages {
		fmt.Fprintf(&b, "  seq %d epoch %d [%s, %s) limit %d offset %d n %d\n", p.Seq, p.Epoch, p.From.Format(time.RFC3339Nano), p.To.Format(time.RFC3339Nano), p.Limit, p.Offset, len(p.IDs))
	}
	if r.lake != nil {
		fmt.Fprintf(&b, "\nobjects:\n  %s\n", strings.Join(r.lake.Keys(r.t, r.prefix), "\n  "))
	}
	_ = os.WriteFile(filepath.Join(dir, "missing.txt"), []byte(b.String()), 0o644)
	// What judge read, to judge it again offline.
	if raw, err := json.Marshal(struct {
		Journal formsim.FormJournal
		Covered state.Intervals
		Rows    []testkit.VersionRow
	}{j, covered, rows}); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "judged.json"), raw, 0o644)
	}
	_ = os.WriteFile(filepath.Join(dir, "runs.log"), []byte(strings.Join(r.logs, "\n")), 0o644)
	if raw, err := os.ReadFile(r.w.State); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "syncd.db"), raw, 0o644)
	}
	_ = os.WriteFile(filepath.Join(dir, "config.yaml"), mustRead(r.w.Config), 0o644)
	r.t.Logf("debug of the missing submissions of form %s in %s", form, dir)
}

func mustRead(p string) []byte { b, _ := os.ReadFile(p); return b }

func first(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return ids[0]
}

func lastOf(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return ids[len(ids)-1]
}
