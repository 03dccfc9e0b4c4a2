package forms

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// unlistedAnswers adds to every submission an answer to a question the
// form's metadata does not list, both named "Email": qEarly in the first
// window (its pages read from the beginning), qLate in the others.
type unlistedAnswers struct{ API }

func (u unlistedAnswers) ListSubmissions(ctx context.Context, formID string, p api.ListParams) (*api.SubmissionPage, error) {
	page, err := u.API.ListSubmissions(ctx, formID, p)
	if err != nil {
		return nil, err
	}
	for i := range page.Responses {
		s := &page.Responses[i]
		id := "qEarly"
		if p.AfterDate != nil {
			id = "qLate"
		}
		s.Questions = append(s.Questions, api.Answer{ID: id, Name: "Email", Type: "ShortAnswer", Value: json.RawMessage(fmt.Sprintf("%q", id))})
	}
	return page, nil
}

// cellSink keeps, per column name, the string values each batch wrote.
// Its first two commits wait for each other, so that two windows are built
// before either commits.
type cellSink struct {
	mu      sync.Mutex
	batches map[string]bool
	cells   map[string][]string
	arrived int
	both    chan struct{}
}

// Commit gathers the batch's parts into one record.
func (s *cellSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	return sink.WithGathered(parts, func(rec arrow.Record) error { return s.commitRecord(ctx, b, rec) })
}

func (s *cellSink) commitRecord(ctx context.Context, b sink.Batch, rec arrow.Record) error {
	s.mu.Lock()
	s.arrived++
	if s.arrived == 2 {
		close(s.both)
	}
	s.mu.Unlock()
	select {
	case <-s.both:
	case <-time.After(5 * time.Second): // a plan of one window
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batches[b.ID] {
		return nil
	}
	s.batches[b.ID] = true
	for i, f := range rec.Schema().Fields() {
		col, ok := rec.Column(i).(*array.String)
		if !ok {
			continue
		}
		for r := 0; r < col.Len(); r++ {
			if col.IsValid(r) {
				s.cells[f.Name] = append(s.cells[f.Name], strings.Clone(col.Value(r)))
			}
		}
	}
	return nil
}

func (s *cellSink) Committed(_ context.Context, b sink.Batch) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[b.ID], nil
}

func (s *cellSink) Close() error { return nil }

// Windows of a backfill run concurrently, each on a copy of the pass's
// table. Two questions the metadata does not list, with one name, first
// seen in different windows: each batch must write each question under the
// column the pinned table gives it (it wrote both as email_2, and the pin
// named the second email_3).
func TestConcurrentWindowsAgreeOnNewColumns(t *testing.T) {
	clk := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	sim := testkit.StartSim(t, formsim.Config{Seed: 5, Forms: 1, Submissions: 600,
		Start: clk.AddDate(0, 0, -4), End: clk.Add(-time.Hour), Now: func() time.Time { return clk }})
	client, err := api.New(api.Config{BaseURL: sim.BaseURL, APIKey: testkit.APIKey, RateLimit: 1000, Burst: 100, MaxAttempts: 2,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenBolt(context.Background(), state.BoltOptions{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snk := &cellSink{batches: map[string]bool{}, cells: map[string][]string{}, both: make(chan struct{})}
	form := sim.FormIDs()[0]
	// Windows of about 300 rows, two at a time.
	p := poller.New(snk, store, poller.Options{SafetyLag: time.Minute, MaxRowsPerBatch: 300, Now: func() time.Time { return clk }})
	src := unlistedAnswers{API: client}
	s := NewStream(src, form, "", StreamOptions{})
	if res := p.Backfill(context.Background(), s, time.Time{}, clk, 2, nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	st, err := store.Get(context.Background(), s.Key())
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := schema.Unmarshal(st.Schema)
	if err != nil {
		t.Fatal(err)
	}
	columnOf := map[string]string{}
	for _, src := range pinned.Sources {
		columnOf[src.ID] = src.Column
	}
	if columnOf["qEarly"] == "" || columnOf["qLate"] == "" || columnOf["qEarly"] == columnOf["qLate"] {
		t.Fatalf("pinned columns: qEarly %q, qLate %q", columnOf["qEarly"], columnOf["qLate"])
	}
	if len(snk.batches) < 2 {
		t.Fatalf("%d batches: the test needs windows built side by side", len(snk.batches))
	}
	for _, id := range []string{"qEarly", "qLate"} {
		col := columnOf[id]
		n := 0
		for _, v := range snk.cells[col] {
			if v != id {
				t.Fatalf("column %s, which the pinned table gives question %s, holds an answer of %s", col, id, v)
			}
			n++
		}
		if n == 0 {
			t.Errorf("column %s holds no answer of question %s", col, id)
		}
	}
}
