package chaos

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// stopAfterSink commits to the Parquet sink and then fails, as a process
// killed between the sink's commit and the state's leaves a batch: in the
// output, its intent open.
type stopAfterSink struct{ *parquetsink.Sink }

func (s stopAfterSink) Commit(ctx context.Context, b sink.Batch, parts sink.Parts) (int64, error) {
	n, err := s.Sink.Commit(ctx, b, parts)
	if err != nil {
		return n, err
	}
	return n, errors.New("stopped between the sink's commit and the state's")
}

// TestRecoveredBatchKeepsItsColumnTypes: a form's first batch reaches the
// sink, the process stops before the state commits it (nothing is pinned
// yet), a question changes type, and the next pass recovers the batch and
// goes on: every column must keep one type in every file (the changed
// question gets a variant column).
//
// It FAILS on this syncd, deterministically: poller.recoverIntents commits
// a batch it finds in the sink without the batch's schema
// (state.Commit.Schema unset), so the table stays unpinned, and the next
// pass pins it afresh from the changed metadata: the recovered file has
// the column as VARCHAR, the later ones as DOUBLE. The campaign's type
// check found it first, in backfill rounds (a backfill of the history only
// commits no empty window that would pin the table first) with many kills
// under metadata churn: seed 11, SYNCD_CHAOS_KILLS=6
// SYNCD_CHAOS_SUBMISSIONS=300 SYNCD_CHAOS_FORMS=2 SYNCD_CHAOS_SINK_EVERY=100
// ("column full_name is VARCHAR in one file and DOUBLE in …", round 4;
// "i_agree_to_the_terms_conditions is BOOLEAN in one file and VARCHAR",
// round 20 of another run: the first batch's footer has another schema
// fingerprint than the two after it). Left unfixed here (test-only work).
func TestRecoveredBatchKeepsItsColumnTypes(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CHAOS_SEED")
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 100000), Forms: 2, Submissions: 300, Start: end.AddDate(0, 0, -4), End: end})
	form := sim.FormIDs()[1]
	meta, _ := sim.Form(form)
	question := ""
	for _, q := range meta.Questions {
		if q.Type == "ShortAnswer" || q.Type == "LongAnswer" || q.Type == "Email" {
			question = q.ID
			break
		}
	}
	if question == "" {
		t.Fatalf("form %s has no text question to retype: %+v", form, meta.Questions)
	}
	client, err := forms.New(forms.Config{BaseURL: sim.BaseURL, APIKey: testkit.APIKey, RateLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, err := parquetsink.New(parquetsink.Options{Root: root, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := state.OpenBolt(ctx, state.BoltOptions{Path: filepath.Join(t.TempDir(), "syncd.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	opts := poller.Options{MaxRowsPerBatch: 60, SafetyLag: time.Second}
	job := poller.Job{Stream: form}

	// A backfill of the history only (as in the campaign's backfill
	// rounds): every window holds rows, so no empty window commits, and
	// pins the table, before the first batch.
	stream := formsource.NewStream(client, job.Stream, "", formsource.StreamOptions{})
	if res := poller.New(stopAfterSink{out}, store, opts).Backfill(ctx, stream, end.AddDate(0, 0, -4), end, 1, nil); res.Err == nil {
		t.Fatal("the first pass did not stop after its first batch reached the sink")
	}
	if err := sim.ChangeQuestionType(form, question, "NumberInput"); err != nil {
		t.Fatal(err)
	}
	res := poller.New(out, store, opts).Sync(ctx, stream, job.Start)
	if res.Err != nil {
		t.Fatalf("the second pass: %v", res.Err)
	}
	if res.Recovered == 0 {
		t.Fatalf("the second pass recovered no batch: %+v", res)
	}
	checkTypes(t, testkit.OpenDuck(t), root, poller.DefaultTable(form))
	st, err := store.Get(ctx, form)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Intents) > 0 {
		t.Errorf("%d intents still open", len(st.Intents))
	}
}
