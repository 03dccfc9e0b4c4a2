package sourcetest_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	srcforms "github.com/syncd-dev/syncd/internal/source/forms"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/sourcetest"
	"github.com/syncd-dev/syncd/internal/state"
)

// The suite's own tests: each runs the suite over a forms stream broken on
// purpose, in a child process (a failing suite fails its *testing.T), and
// checks that the checks meant to catch the breakage fail, and that the
// unbroken stream passes.

const brokenEnv = "SOURCETEST_BROKEN"

// breakages are the broken streams, by name, and the cases that must fail.
var breakages = map[string]struct {
	br   breakage
	fail []string
}{
	// The control: nothing broken, nothing fails.
	"none": {},
	// Pages lose one submission in five: records missing.
	"drop": {br: breakage{api: func(a srcforms.API) srcforms.API { return dropAPI{a} }}, fail: []string{"Paging", "Cursor"}},
	// Each window is read from an hour before its start: records twice,
	// rows outside their window.
	"widen": {br: breakage{stream: func(s *srcforms.Stream) poller.Stream { return widened{s} }}, fail: []string{"Paging", "Cursor", "Versions"}},
	// Each window read as [start, end]: the record at its end twice, or
	// past the range.
	"inclusive": {br: breakage{stream: func(s *srcforms.Stream) poller.Stream { return inclusive{s} }}, fail: []string{"Paging"}},
	// Windows planned with a minute's hole before each cut: a gap.
	"gap": {br: breakage{stream: func(s *srcforms.Stream) poller.Stream { return gapped{s} }}, fail: []string{"Paging", "Cursor"}},
	// Count says one more than there is.
	"count": {br: breakage{stream: func(s *srcforms.Stream) poller.Stream { return overcount{s} }}, fail: []string{"Cursor"}},
	// Edits are invisible: every lastUpdatedAt is dropped.
	"stale": {br: breakage{api: func(a srcforms.API) srcforms.API { return staleAPI{a} }}, fail: []string{"Versions", "Deletions"}},
	// A reconcile that never finds deletions.
	"no-gone": {br: breakage{stream: func(s *srcforms.Stream) poller.Stream { return noGone{s} }}, fail: []string{"Deletions"}},
}

// TestBrokenStream runs the suite over the breakage named in brokenEnv; it
// is the child of TestSuiteCatchesBrokenStreams and does nothing unless
// that names one.
func TestBrokenStream(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return
	}
	b, ok := breakages[name]
	if !ok {
		t.Fatalf("no breakage %q", name)
	}
	sourcetest.Run(t, formsHarness(b.br))
}

func TestSuiteCatchesBrokenStreams(t *testing.T) {
	for name, b := range breakages {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStream$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			failed := map[string]bool{}
			for _, line := range strings.Split(string(out), "\n") {
				if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: TestBrokenStream/"); ok {
					failed[strings.Fields(f)[0]] = true
				}
			}
			for _, c := range b.fail {
				if !failed[c] {
					t.Errorf("breakage %s: case %s passed, want it to fail", name, c)
				}
			}
			if len(b.fail) == 0 && err != nil {
				t.Errorf("the unbroken stream failed the suite: %v", err)
			}
			if len(b.fail) > 0 && err == nil {
				t.Errorf("breakage %s: the suite passed", name)
			}
			if t.Failed() {
				t.Logf("child output:\n%s", out)
			}
		})
	}
}

// dropAPI drops one submission in five from every page.
type dropAPI struct{ srcforms.API }

func (d dropAPI) ListSubmissions(ctx context.Context, formID string, p api.ListParams) (*api.SubmissionPage, error) {
	page, err := d.API.ListSubmissions(ctx, formID, p)
	if err != nil || page == nil {
		return page, err
	}
	out := *page
	out.Responses = nil
	for _, s := range page.Responses {
		h := fnv.New32a()
		fmt.Fprint(h, s.SubmissionID)
		if h.Sum32()%5 != 0 {
			out.Responses = append(out.Responses, s)
		}
	}
	return &out, nil
}

// staleAPI hides every edit: no submission has a lastUpdatedAt.
type staleAPI struct{ srcforms.API }

func (d staleAPI) ListSubmissions(ctx context.Context, formID string, p api.ListParams) (*api.SubmissionPage, error) {
	page, err := d.API.ListSubmissions(ctx, formID, p)
	if err != nil || page == nil {
		return page, err
	}
	for i := range page.Responses {
		page.Responses[i].LastUpdatedAt = nil
	}
	return page, nil
}

// widened reads each window from an hour before its start.
type widened struct{ *srcforms.Stream }

func (w widened) Read(ctx context.Context, win poller.Window, rows *poller.Rows) error {
	return w.Stream.Read(ctx, poller.Window{Start: win.Start.Add(-time.Hour), End: win.End, Count: -1}, rows)
}

// gapped ends every window but a gap's last a minute early.
type gapped struct{ *srcforms.Stream }

func (g gapped) Plan(ctx context.Context, gap state.Interval, cut poller.Cutter, emit func(poller.Window) error) error {
	return g.Stream.Plan(ctx, gap, cut, func(w poller.Window) error {
		if w.End.Before(gap.End) {
			w.End, w.First, w.Count = w.End.Add(-time.Minute), nil, -1
		}
		return emit(w)
	})
}

// overcount counts one record more than there is.
type overcount struct{ *srcforms.Stream }

func (o overcount) Count(ctx context.Context, start, end time.Time) (int, error) {
	n, err := o.Stream.Count(ctx, start, end)
	return n + 1, err
}

// noGone never reports a deletion.
type noGone struct{ *srcforms.Stream }

func (n noGone) Reconcile(ctx context.Context, w poller.Window, known map[string]state.Version, seen time.Time) (poller.Changes, error) {
	ch, err := n.Stream.Reconcile(ctx, w, known, seen)
	ch.Index.Gone = nil
	return ch, err
}

// inclusive reads each window with its end.
type inclusive struct{ *srcforms.Stream }

func (w inclusive) Read(ctx context.Context, win poller.Window, rows *poller.Rows) error {
	return w.Stream.Read(ctx, poller.Window{Start: win.Start, End: win.End.Add(time.Millisecond), Count: -1}, rows)
}
