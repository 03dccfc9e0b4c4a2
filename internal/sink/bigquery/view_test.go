package bigquery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gbq "cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/api/iterator"

	"github.com/syncd-dev/syncd/internal/bqfake"
	"github.com/syncd-dev/syncd/internal/sink"
)

// clock is a time the test moves; the sink reads it for its view re-checks.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// withClock gives s a clock the test moves.
func withClock(s *Sink) *clock {
	c := &clock{t: time.Date(2024, 5, 2, 9, 0, 0, 0, time.UTC)}
	s.now = c.now
	return c
}

// tombstoned is batch id of table form_fa1 versioned by its column
// "version", and a record of it: ids at version, all deleted or none.
func tombstoned(t *testing.T, id string, ids []string, version int, deleted bool) (sink.Batch, arrow.Record) {
	b := batch(id)
	b.KeyColumn, b.VersionColumn = "submission_id", "version"
	fields := append(baseFields(),
		arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "_deleted", Type: arrow.FixedWidthTypes.Boolean, Nullable: true})
	return b, record(t, schemaOf(fields...), b, ids, map[string]string{"version": fmt.Sprint(version), "_deleted": fmt.Sprint(deleted)})
}

// column runs q on the fake and returns its first column, sorted.
func column(ctx context.Context, t *testing.T, c *gbq.Client, q string) []string {
	t.Helper()
	it, err := c.Query(q).Read(ctx)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var out []string
	for {
		var row []gbq.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		out = append(out, fmt.Sprint(row[0]))
	}
	slices.Sort(out)
	return out
}

// A latest view dropped while syncd runs is back, correct, with the first
// batch of its table once viewRecheck has passed since the sink last saw
// it; a batch sooner reads no view (no call per batch); a view someone
// redefined meanwhile is kept as it is.
func TestLatestViewLookedAtAgain(t *testing.T) {
	const mine = "SELECT submission_id FROM `proj.forms.form_fa1`"
	syncdQuery := sink.LatestQuery("`proj.forms.form_fa1`", "submission_id", "version")
	drop := func(ctx context.Context, v *gbq.Table) error { return v.Delete(ctx) }
	cases := []struct {
		name string
		// change is what a person does to the view after the first batch.
		change    func(ctx context.Context, v *gbq.Table) error
		after     time.Duration // from the first batch to the second
		wantQuery string        // of the view after the second batch; "" none
		wantGets  int           // of the view by the second batch
	}{
		{"dropped, looked at again", drop, viewRecheck, syncdQuery, 1},
		{"dropped, looked at much later", drop, 24 * time.Hour, syncdQuery, 1},
		{"dropped, too soon to look again", drop, viewRecheck - time.Second, "", 0},
		{"redefined, kept", func(ctx context.Context, v *gbq.Table) error {
			if err := v.Delete(ctx); err != nil {
				return err
			}
			return v.Create(ctx, &gbq.TableMetadata{ViewQuery: mine})
		}, viewRecheck, mine, 1},
		{"in place", func(context.Context, *gbq.Table) error { return nil }, viewRecheck, syncdQuery, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := bqfake.New(t)
			s, gets := newCountingSink(t, f)
			clk := withClock(s)
			c := testClient(t, f)

			b1, r1 := tombstoned(t, "b1", ids("s", 2), 1, false)
			if err := sink.CommitRecord(ctx, s, b1, r1); err != nil {
				t.Fatalf("commit b1: %v", err)
			}
			if v, ok := f.Table(testProject, testDataset, "form_fa1_latest"); !ok || v.View == nil || v.View.Query != syncdQuery {
				t.Fatalf("after the first batch form_fa1_latest is %+v, want a view of %s", v, syncdQuery)
			}
			if err := tc.change(ctx, c.Dataset(testDataset).Table("form_fa1_latest")); err != nil {
				t.Fatalf("change the view: %v", err)
			}
			clk.add(tc.after)
			gets.mu.Lock()
			before := gets.n["form_fa1_latest"]
			gets.mu.Unlock()

			// s001 deleted at version 2: the view shows s000 alone.
			b2, r2 := tombstoned(t, "b2", []string{"s001"}, 2, true)
			if err := sink.CommitRecord(ctx, s, b2, r2); err != nil {
				t.Fatalf("commit b2: %v", err)
			}
			gets.mu.Lock()
			n := gets.n["form_fa1_latest"] - before
			gets.mu.Unlock()
			if n != tc.wantGets {
				t.Errorf("the second batch read form_fa1_latest %d times, want %d", n, tc.wantGets)
			}
			v, ok := f.Table(testProject, testDataset, "form_fa1_latest")
			switch {
			case tc.wantQuery == "" && ok:
				t.Errorf("form_fa1_latest is %+v, want it still missing", v)
			case tc.wantQuery == "":
			case !ok:
				t.Fatalf("form_fa1_latest is missing after the second batch, want a view of %s", tc.wantQuery)
			case v.View == nil || v.View.Query != tc.wantQuery:
				t.Errorf("form_fa1_latest is %+v, want a view of %s", v.View, tc.wantQuery)
			case tc.wantQuery == syncdQuery:
				if got := column(ctx, t, c, "SELECT submission_id FROM `proj.forms.form_fa1_latest`"); !slices.Equal(got, []string{"s000"}) {
					t.Errorf("form_fa1_latest holds %v, want [s000]: s001's latest version is deleted", got)
				}
			}
		})
	}
}

// Batches of several tables committed at once, after their views were
// dropped, all load, and each view is made again with one look at it.
func TestDroppedLatestViewsMadeAgainUnderConcurrentBatches(t *testing.T) {
	ctx := context.Background()
	f := bqfake.New(t)
	s, gets := newCountingSink(t, f)
	clk := withClock(s)
	c := testClient(t, f)
	tables := []string{"form_fa1", "form_fb2", "form_fc3"}
	commitAll := func(round int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(tables))
		for _, table := range tables {
			for i := range 2 {
				b := versioned(fmt.Sprintf("%s-r%d-%d", table, round, i))
				b.Table, b.Stream = table, table
				rec := record(t, schemaOf(baseFields()...), b, ids(fmt.Sprintf("r%d-%d-", round, i), 2), nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := sink.CommitRecord(ctx, s, b, rec); err != nil {
						errs <- fmt.Errorf("commit %s: %w", b.ID, err)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	commitAll(1)
	for _, table := range tables {
		if err := c.Dataset(testDataset).Table(table + "_latest").Delete(ctx); err != nil {
			t.Fatalf("drop %s_latest: %v", table, err)
		}
	}
	clk.add(viewRecheck)
	gets.mu.Lock()
	before := map[string]int{}
	for _, table := range tables {
		before[table] = gets.n[table+"_latest"]
	}
	gets.mu.Unlock()
	commitAll(2)
	gets.mu.Lock()
	defer gets.mu.Unlock()
	for _, table := range tables {
		want := sink.LatestQuery("`proj.forms."+table+"`", "submission_id", "_synced_at")
		if v, ok := f.Table(testProject, testDataset, table+"_latest"); !ok || v.View == nil || v.View.Query != want {
			t.Errorf("%s_latest is %+v after the second round, want a view of %s", table, v, want)
		}
		if n := gets.n[table+"_latest"] - before[table]; n != 1 {
			t.Errorf("the second round read %s_latest %d times, want once", table, n)
		}
	}
}
