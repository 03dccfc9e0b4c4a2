package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// lake is a bucket on a local server of one store holding a test's
// output, and, on GCS, its state too (state.url takes gs:// only in the
// configuration; the state package's tests cover S3 and Azure state).
type lake struct {
	*lakes.Lake
	inBucket bool // the state is the object lakeState; else the workdir's file
}

const (
	lakeOut   = "lake/forms"       // key prefix of the Parquet objects
	lakeState = "syncd/prod/state" // key of the state object
)

// startLake starts the server of scheme with one bucket and points this
// process and the syncd processes it starts at it.
func startLake(t *testing.T, scheme string) *lake {
	t.Helper()
	return &lake{Lake: lakes.Start(t, scheme), inBucket: scheme == "gs"}
}

func (l *lake) stateURL() string { return l.URL(lakeState) }

// config puts the sink (and on GCS the state) in the bucket.
func (l *lake) config(cfg testkit.Config) testkit.Config {
	cfg.Sink = "sink:\n  type: parquet\n  parquet:\n    path: " + l.URL(lakeOut) + "\n"
	if l.inBucket {
		cfg.State = "  url: " + l.stateURL() + "\n  lease_ttl: 1s\n"
	}
	return cfg
}

// forms returns every form's state, read-only.
func (l *lake) forms(t *testing.T, w *testkit.Workdir) map[string]state.StreamState {
	t.Helper()
	ctx := context.Background()
	var st state.Store
	var err error
	if l.inBucket {
		st, err = state.OpenObject(ctx, state.ObjectOptions{URL: l.stateURL(), ReadOnly: true})
	} else {
		st, err = state.OpenBolt(ctx, state.BoltOptions{Path: w.State, ReadOnly: true})
	}
	if err != nil {
		t.Fatalf("open state: %v", err)
	}
	defer st.Close()
	list, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.StreamState{}
	for _, fs := range list {
		out[fs.Key] = fs
	}
	return out
}

// objects counts the Parquet objects.
func (l *lake) objects(t *testing.T) int { return len(l.Keys(t, lakeOut)) }

// check downloads the output (DuckDB cannot read the local servers) and
// requires every submission of the committed windows exactly once, and one
// object per committed batch.
func (l *lake) check(t *testing.T, sim *testkit.Sim, w *testkit.Workdir, covers time.Time) {
	t.Helper()
	dir := t.TempDir()
	objects := l.Download(t, lakeOut, dir)
	duck := testkit.OpenDuck(t)
	states := l.forms(t, w)
	var batches int64
	for _, id := range sim.FormIDs() {
		fs := states[id]
		if len(fs.Intents) > 0 {
			t.Errorf("form %s: %d intents still open after a finished run", id, len(fs.Intents))
		}
		if n := len(fs.Committed); n == 0 || fs.Committed[n-1].End.Before(covers) {
			t.Errorf("form %s: committed windows %v do not reach %s", id, fs.Committed, covers)
		}
		batches += fs.Batches
		got := duck.IDCounts(t, dir, poller.DefaultTable(id))
		testkit.CheckExactlyOnce(t, got, testkit.ExpectedIn(sim, id, fs.Committed))
	}
	// A batch writes one object per day it holds rows of (none when its
	// window turned out empty), and every object is one of a committed
	// batch: DuckDB found exactly the expected rows above.
	if objects == 0 || batches == 0 {
		t.Errorf("%d objects in the bucket for %d committed batches", objects, batches)
	}
}

// TestBucketOutputAndState: a pass writes Parquet objects and the state
// object, a second pass writes nothing, and while `syncd run` holds the
// lease a second syncd fails at once with a clear sentence.
func TestBucketOutputAndState(t *testing.T) {
	for _, scheme := range lakes.Schemes {
		t.Run(scheme, func(t *testing.T) { testBucketOutputAndState(t, scheme) })
	}
}

func testBucketOutputAndState(t *testing.T, scheme string) {
	start, end := history(6)
	sim := testkit.StartSim(t, formsim.Config{Seed: 41, Forms: 2, Submissions: 900, Start: start, End: end})
	l := startLake(t, scheme)
	addr := testkit.FreeAddr(t)
	w := testkit.NewWorkdir(t, sim.BaseURL, l.config(testkit.Config{
		Sync:  "  safety_lag: 0s\n  max_rows_per_batch: 200\n  schedule: \"@every 1h\"\n  jitter: 0s\n",
		Extra: "server:\n  addr: " + addr + "\n",
	}))
	ctx := context.Background()
	if res := testkit.Run(ctx, syncdBin, w, "validate"); res.Code != 0 {
		t.Fatalf("validate exited %d: %s%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once exited %d: %s", res.Code, tail(res.Stderr))
	}
	l.check(t, sim, w, end)
	before := l.objects(t)
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("second once exited %d: %s", res.Code, tail(res.Stderr))
	}
	if after := l.objects(t); after != before {
		t.Errorf("a second pass over nothing new wrote objects: %d before, %d after", before, after)
	}
	if res := testkit.Run(ctx, syncdBin, w, "state", "show"); res.Code != 0 || !strings.Contains(res.Stdout, sim.FormIDs()[0]) {
		t.Errorf("state show exited %d: %s%s", res.Code, res.Stdout, tail(res.Stderr))
	}

	// The daemon holds the state; a second syncd is refused before it writes.
	cmd, _, stderr, err := testkit.Start(syncdBin, w, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if !eventually(20*time.Second, func() bool { return status(addr, "/healthz") == 200 }) {
		t.Fatalf("daemon never served /healthz: %s", tail(stderr.String()))
	}
	// Refused again after several lease_ttl (1s): the daemon renews its lease.
	for i := 0; i < 3; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		res := testkit.Run(ctx, syncdBin, w, "once")
		if res.Code != 3 || !strings.Contains(res.Stderr, "in use by another syncd") {
			t.Fatalf("once beside a running daemon (try %d) exited %d: %s", i+1, res.Code, tail(res.Stderr))
		}
	}
	// Readers need no lease: state show reads the object beside the writer,
	// and validate writes and deletes its probe object in the output prefix.
	res := testkit.Run(ctx, syncdBin, w, "state", "show", "-o", "json")
	var v stateShowJSON
	// The state object is read directly; a local state file beside it, through
	// the daemon's /status.
	if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &v) != nil || (v.Source != "store" && v.Source != "daemon") || len(v.Forms) == 0 || v.Forms[0].Rows == 0 {
		t.Errorf("state show -o json beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if res := testkit.Run(ctx, syncdBin, w, "validate"); res.Code != 0 || !strings.Contains(res.Stdout, "a probe object was written and deleted") {
		t.Errorf("validate beside the daemon: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	// A backfill beside it runs in the daemon (its control file is in the
	// temporary folder, the state being in the bucket): the range is
	// committed already, so it writes nothing.
	objects := l.objects(t)
	bf := testkit.Run(ctx, syncdBin, w, "backfill", "--form", sim.FormIDs()[0], "--from", start.Format(time.RFC3339), "-o", "json")
	if bf.Code != 0 || !strings.Contains(bf.Stderr, "the backfill runs in it") || !strings.Contains(bf.Stdout, `"rows": 0`) || l.objects(t) != objects {
		t.Errorf("backfill beside the daemon on a bucket state: exit %d\n%s\n%s", bf.Code, bf.Stdout, tail(bf.Stderr))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon did not stop cleanly: %v: %s", err, tail(stderr.String()))
	}
	// A clean stop lets go of the lease: the next run need not wait.
	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once after the daemon stopped exited %d: %s", res.Code, tail(res.Stderr))
	}
	l.check(t, sim, w, end)
	if strings.Contains(stderr.String(), testkit.APIKey) {
		t.Error("the API key appears in the daemon's logs")
	}
}

// dieAfterUpload is a state store whose process dies right after the sink
// committed its first batch: that Commit, and every write after it, fail.
type dieAfterUpload struct {
	state.Store
	dead atomic.Bool
}

var errKilled = errors.New("killed between the upload and the state commit")

func (d *dieAfterUpload) Commit(ctx context.Context, formID string, c state.Commit) error {
	if c.BatchID != "" {
		d.dead.Store(true)
	}
	if d.dead.Load() {
		return errKilled
	}
	return d.Store.Commit(ctx, formID, c)
}

func (d *dieAfterUpload) RecordIntent(ctx context.Context, formID string, in state.Intent) error {
	if d.dead.Load() {
		return errKilled
	}
	return d.Store.RecordIntent(ctx, formID, in)
}

func (d *dieAfterUpload) DropIntent(ctx context.Context, formID, batchID string) error {
	if d.dead.Load() {
		return errKilled
	}
	return d.Store.DropIntent(ctx, formID, batchID)
}

func (d *dieAfterUpload) SetSchema(ctx context.Context, formID string, schema json.RawMessage) error {
	if d.dead.Load() {
		return errKilled
	}
	return d.Store.SetSchema(ctx, formID, schema)
}

func (d *dieAfterUpload) SetError(ctx context.Context, formID, msg string) error {
	if d.dead.Load() {
		return errKilled
	}
	return d.Store.SetError(ctx, formID, msg)
}

// TestBucketKillBetweenUploadAndStateCommit: a batch whose object is in the
// bucket but whose state commit never happened is found by the next run,
// which commits it from the open intent without uploading it again.
func TestBucketKillBetweenUploadAndStateCommit(t *testing.T) {
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 43, Forms: 1, Submissions: 400, Start: start, End: end})
	l := startLake(t, "gs")
	w := testkit.NewWorkdir(t, sim.BaseURL, l.config(testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 150\n"}))
	t.Setenv("FORMS_API_KEY", testkit.APIKey)
	cfg, err := config.Load(w.Config, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, cfg, zap.NewNop(), app.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	store := &dieAfterUpload{Store: a.Store}
	acct := a.Accounts[0]
	p := poller.New(acct.Sink, store, poller.Options{SafetyLag: 0, MaxRowsPerBatch: 150})
	form := sim.FormIDs()[0]
	stream, err := acct.Stream(poller.Job{Stream: form})
	if err != nil {
		t.Fatal(err)
	}
	if res := p.Sync(ctx, stream, start); res.Err == nil || !errors.Is(res.Err, errKilled) {
		t.Fatalf("the pass did not die at the state commit: %v", res.Err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	fs := l.forms(t, w)[form]
	if len(fs.Intents) != 1 || fs.Batches != 0 {
		t.Fatalf("after the kill: intents %v, batches %d; want one open intent, nothing committed", fs.Intents, fs.Batches)
	}
	var open state.Intent
	for _, in := range fs.Intents {
		open = in
	}
	if n := l.objects(t); n != len(open.Parts) || n == 0 {
		t.Fatalf("after the kill: %d objects, want the %d of the batch uploaded (one per day)", n, len(open.Parts))
	}

	if res := testkit.Run(ctx, syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once after the kill exited %d: %s", res.Code, tail(res.Stderr))
	}
	l.check(t, sim, w, end)
}

// TestBucketCrashSafety is TestCrashSafety with the output in a bucket of
// each store (and on GCS the state too): syncd is killed with SIGKILL at
// random instants and rerun until it finishes, and the output must then be
// exact. A rerun that finds the dead process's lease not yet expired exits
// 3 and is retried.
func TestBucketCrashSafety(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	start, end := history(12)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(seed % 1000), Forms: 2, Submissions: 2000, Start: start, End: end})
	ctx := context.Background()
	cfg := testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n", LogLevel: "warn"}
	for i, scheme := range lakes.Schemes {
		t.Run(scheme, func(t *testing.T) {
			// A third of the local-disk test's kills (at least 8) per store
			// keeps make test short; SYNCD_CRASH_KILLS raises them all.
			testkit.KillLoop{Seed: seed, Stream: uint64(7 + i), Kills: max(crashKills()/3, 8),
				Round: func(t *testing.T, r int) (func(testkit.Attempt) testkit.Result, func(*testing.T)) {
					l := startLake(t, scheme)
					w := testkit.NewWorkdir(t, sim.BaseURL, l.config(cfg))
					run := func(a testkit.Attempt) testkit.Result {
						return testkit.RunKilledAfter(ctx, syncdBin, w, a.Delay(1), "once")
					}
					return run, func(t *testing.T) { l.check(t, sim, w, end) }
				},
				Retry: func(res testkit.Result) bool {
					if res.Code == 3 && strings.Contains(res.Stderr, "lease runs until") {
						time.Sleep(200 * time.Millisecond) // the killed run's lease (1s) has not expired yet
						return true
					}
					return false
				},
			}.Run(t)
		})
	}
}
