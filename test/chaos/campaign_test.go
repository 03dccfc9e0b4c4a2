package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// params size the campaign. The defaults are the CI version (under a
// minute or two on 2 cores); make chaos raises them.
type params struct {
	Seed        uint64
	Kills       int // SIGKILLs to land across once and backfill rounds
	Submissions int // per form
	Forms       int
	SinkEvery   int // every Nth round injects a sink or state fault
	MaxRounds   int // bound on rounds, whatever the kills
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func loadParams() params {
	p := params{
		Seed:        uint64(time.Now().UnixNano()),
		Kills:       envInt("SYNCD_CHAOS_KILLS", 24),
		Submissions: envInt("SYNCD_CHAOS_SUBMISSIONS", 500),
		Forms:       envInt("SYNCD_CHAOS_FORMS", 2),
		SinkEvery:   envInt("SYNCD_CHAOS_SINK_EVERY", 1),
	}
	if s, err := strconv.ParseUint(os.Getenv("SYNCD_CHAOS_SEED"), 10, 64); err == nil {
		p.Seed = s
	}
	p.MaxRounds = envInt("SYNCD_CHAOS_MAX_ROUNDS", 4+p.Kills)
	return p
}

// allFaults turns every knob of the simulator on.
func allFaults() formsim.Faults {
	return formsim.Faults{
		ServerErrorRate:     0.03,
		RateLimitRate:       0.01,
		RateLimitBurstEvery: 97,
		RateLimitBurstLen:   2,
		RetryAfter:          time.Second,
		Latency:             time.Millisecond,
		SlowRate:            0.02,
		SlowDelay:           150 * time.Millisecond,
		TruncateRate:        0.02,
		MalformedRate:       0.02,
		BadValueRate:        0.02,
		MetadataChurnEvery:  2,
		ArrivalsPerPage:     1,
		BackdatedPerPage:    1,
		EditsPerPage:        1,
		DeletesPerPage:      1,
	}
}

// reconcileFaults are the faults of the reconcile runs: every fault but
// the changes while paging (arrivals, imports, edits, deletions), so that
// the service stands still while a reconcile re-reads it and the judge
// knows the one version each submission must have.
func reconcileFaults() formsim.Faults {
	f := allFaults()
	f.ArrivalsPerPage, f.BackdatedPerPage, f.EditsPerPage, f.DeletesPerPage = 0, 0, 0, 0
	return f
}

// Commands by the name the table shows.
const (
	cmdOnce      = "once"
	cmdBackfill  = "backfill"
	cmdReconcile = "reconcile"
)

// maxReconcileKills bounds the kills of one reconcile's loop: most kills
// of a round then land in its passes, where most batches are written.
const maxReconcileKills = 3

// lookback is the rounds' sync.lookback: half of their six days of
// history, so that a reconcile's --from falls inside it or before it.
const lookback = 3 * 24 * time.Hour

// tally is the campaign's table.
type tally struct {
	rounds, kills, runs int
	byCmd               map[string]*cmdTally
	froms               map[string]int // reconciles by where their --from was
	faults              map[string]int // sink and state faults injected, by kind
	detected            map[string]int // ... that syncd refused with a clear error
	simFaults           map[formsim.FaultKind]int64
	changes             [3]int // edits, deletions, back-dated imports made between runs
	v                   verdict
}

// cmdTally is what one command did: kill loops (a round's runs of it until
// one finished), runs and kills.
type cmdTally struct{ loops, runs, kills int }

func newTally() *tally {
	return &tally{byCmd: map[string]*cmdTally{cmdOnce: {}, cmdBackfill: {}, cmdReconcile: {}}, froms: map[string]int{},
		faults: map[string]int{}, detected: map[string]int{}, simFaults: map[formsim.FaultKind]int64{}}
}

func TestChaosCampaign(t *testing.T) {
	p := loadParams()
	t.Logf("seed %d (rerun with SYNCD_CHAOS_SEED=%d SYNCD_CHAOS_KILLS=%d SYNCD_CHAOS_SUBMISSIONS=%d SYNCD_CHAOS_FORMS=%d)",
		p.Seed, p.Seed, p.Kills, p.Submissions, p.Forms)
	rng := rand.New(rand.NewPCG(p.Seed, 0xc4a05))
	mounts := canMount(t)
	if !mounts {
		t.Log("tmpfs cannot be mounted here (not root?): disk-full and read-only rounds are skipped; state faults still run")
	}
	tl := newTally()
	sinkKinds := []string{faultDiskFull, faultReadOnly, faultStateTruncated, faultStateCorrupted}
	if !mounts {
		sinkKinds = []string{faultStateTruncated, faultStateCorrupted}
	}
	// How long an uninterrupted run of each command takes bounds the kill
	// instants; measured by each command's first run, which is not killed.
	full := map[string]time.Duration{}
	sinkRounds := len(sinkKinds) * max(1, p.Kills/100)
	sinkRound := 0
	for round := 1; tl.kills < p.Kills || round <= 2 || sinkRound < sinkRounds; round++ {
		if round > p.MaxRounds+sinkRounds*p.SinkEvery {
			t.Fatalf("%d rounds did not land %d kills (%d landed)", round-1, p.Kills, tl.kills)
		}
		mode := cmdOnce
		if round%2 == 0 {
			mode = cmdBackfill
		}
		fault := ""
		if round > 2 && (round-3)%p.SinkEvery == 0 && sinkRound < sinkRounds {
			fault = sinkKinds[sinkRound%len(sinkKinds)]
			sinkRound++
		}
		// A subtest per round: its folders and mounts go when it ends.
		passed := t.Run(fmt.Sprintf("round%03d-%s-%s", round, mode, orNone(fault)), func(t *testing.T) {
			r := &roundRun{t: t, p: p, rng: rng, mode: mode, fault: fault, round: round, full: full, mounts: mounts, killFrac: 0.5}
			r.run(tl)
		})
		tl.rounds++
		if !passed {
			t.Fatalf("round %d (%s, fault %q) failed; rerun with SYNCD_CHAOS_SEED=%d and the same sizes", round, mode, orNone(fault), p.Seed)
		}
	}
	t.Log("\n" + tl.table(p, "local disk"))
}

func (tl *tally) table(p params, sink string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos campaign, seed %d (SYNCD_CHAOS_SEED=%d reruns it), %d forms x %d submissions, output on %s\n", p.Seed, p.Seed, p.Forms, p.Submissions, sink)
	c := func(name string) string {
		x := tl.byCmd[name]
		return fmt.Sprintf("%d/%d/%d", x.loops, x.runs, x.kills)
	}
	fmt.Fprintf(&b, "| rounds | kills | runs | once loops/runs/kills | backfill loops/runs/kills | reconcile loops/runs/kills | reconcile --from before all/before lookback/inside lookback | edits/deletions/imports between runs |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %s | %s | %s | %d/%d/%d | %d/%d/%d |\n\n", tl.rounds, tl.kills, tl.runs, c(cmdOnce), c(cmdBackfill), c(cmdReconcile),
		tl.froms[fromBeforeAll], tl.froms[fromBeforeLookback], tl.froms[fromInLookback], tl.changes[0], tl.changes[1], tl.changes[2])
	if len(tl.faults) > 0 {
		fmt.Fprintf(&b, "| sink/state fault | injected | refused with a clear error |\n|---|---|---|\n")
		for _, k := range []string{faultDiskFull, faultReadOnly, faultStateTruncated, faultStateCorrupted} {
			fmt.Fprintf(&b, "| %s | %d | %d |\n", k, tl.faults[k], tl.detected[k])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| simulator fault | injected |\n|---|---|\n")
	for _, k := range []formsim.FaultKind{formsim.FaultServerError, formsim.FaultRateLimit, formsim.FaultSlow, formsim.FaultTruncated,
		formsim.FaultMalformed, formsim.FaultBadValue, formsim.FaultChurn, formsim.FaultArrival, formsim.FaultBackdated,
		formsim.FaultEdit, formsim.FaultDelete} {
		fmt.Fprintf(&b, "| %s | %d |\n", k, tl.simFaults[k])
	}
	v := tl.v
	fmt.Fprintf(&b, "\n| submissions expected | found | duplicated | missing | unexpected | either way (deleted while walked) | import+delete cancelling behind the offset | exported then deleted (kept) | imported after commit (not seen by the pass) |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", v.Expected, v.Found, v.Duplicated, v.Missing, v.Unexpected, v.Ambiguous, v.Cancelled, v.Deleted, v.Late)
	fmt.Fprintf(&b, "\n| versions checked | tombstones checked | duplicated versions | missing versions | unexpected versions | latest view differences |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d |\n", v.Versions, v.Tombstones, v.DupVersions, v.MissingVersions, v.UnexpectedVersions, v.LatestDiff)
	return b.String()
}

// Where a reconcile's --from lies, by the name the table shows.
const (
	fromBeforeAll      = "before all"      // before the first submission: the whole history
	fromBeforeLookback = "before lookback" // in the history, before now - sync.lookback
	fromInLookback     = "inside lookback" // inside the scheduled reconcile's reach
)

// roundRun is one round in a fresh simulator and installation:
//  1. the pass phase: runs of the round's command (once, or backfill of one
//     form) under every simulator fault, killed at random instants until
//     one finishes, with edits, deletions and back-dated imports between
//     the runs and maybe a sink or state fault; then the pass judge (judge
//     and judgePassVersions);
//  2. edits, deletions and back-dated imports, before and inside the
//     lookback; then for each form `syncd reconcile --from` (before all,
//     before the lookback or inside it) under every fault but the changes,
//     killed at random instants until it finishes; then judgeVersions over
//     what it re-read;
//  3. settling: faults off, `once` and `reconcile --from` before all, then
//     judgeVersions over everything, and the latest view (sink.LatestQuery
//     in DuckDB) must equal the service.
type roundRun struct {
	t        *testing.T
	p        params
	rng      *rand.Rand
	mode     string
	fault    string
	round    int
	full     map[string]time.Duration // an uninterrupted run, by command
	killFrac float64                  // kill instants lie in this first share of an uninterrupted run
	mounts   bool
	// lake, when set, holds the output (under prefix) instead of the
	// local disk.
	lake   *lakes.Lake
	prefix string

	sim        *testkit.Sim
	w          *testkit.Workdir
	start, end time.Time
	forms      []string // the forms the round syncs and checks
	kills      int
	outs       int      // output downloads from the lake
	logs       []string // every run's command, outcome and output, for SYNCD_CHAOS_DEBUG_DIR
}

func (r *roundRun) run(tl *tally) {
	t := r.t
	r.end = time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	r.start = r.end.AddDate(0, 0, -6)
	r.sim = testkit.StartSim(t, formsim.Config{Seed: int64(r.p.Seed%100000) + int64(r.round), Forms: r.p.Forms, Submissions: r.p.Submissions,
		Start: r.start, End: r.end, InclusiveDates: r.round%3 == 0})
	sim := r.sim
	sim.EnableJournal()
	sim.SetFaults(allFaults())
	forms := sim.FormIDs()
	args := []string{cmdOnce}
	cfg := testkit.Config{Sync: fmt.Sprintf("  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n  lookback: %s\n  reconcile_every: 24h\n", lookback), LogLevel: "warn"}
	if lv := os.Getenv("SYNCD_CHAOS_LOG_LEVEL"); lv != "" {
		cfg.LogLevel = lv
	}
	r.forms = forms
	if r.mode == cmdBackfill {
		form := forms[r.rng.IntN(len(forms))]
		args = []string{cmdBackfill, "--form", form, "--from", r.start.Format(time.RFC3339), "--to", r.end.Format(time.RFC3339), "--concurrency", "3"}
		cfg.Forms = "forms:\n  - id: " + form + "\n"
		r.forms = []string{form}
	}
	if r.lake != nil {
		cfg.Sink = "sink:\n  type: parquet\n  parquet:\n    path: " + r.lake.URL(r.prefix) + "\n"
	}
	r.w = testkit.NewWorkdir(t, sim.BaseURL, cfg)
	var out *tmpfs
	if r.fault == faultDiskFull || r.fault == faultReadOnly {
		out = mountTmpfs(t, r.w.Out)
	}

	// 1. The pass phase.
	before := r.snapshot()
	lo := time.Now().Truncate(time.Millisecond).UnixMicro() // an edit's version is the simulator's clock in whole ms
	exec := func(delay time.Duration) testkit.Result { return r.exec(tl, r.mode, delay, args...) }
	if r.fault != "" {
		// A few kills first, so the fault meets open intents and
		// half-written batches, then the fault, then the rest.
		if r.full[r.mode] > 0 {
			for range 1 + r.rng.IntN(3) {
				exec(r.killDelay(r.mode))
			}
		}
		r.inject(tl, r.w, out, exec)
	}
	r.finish(tl, r.mode, args, true)
	hi := time.Now().UnixMicro()
	sim.SetFaults(reconcileFaults())
	after := r.snapshot()
	dir := r.output()
	duck := testkit.OpenDuck(t)
	var v verdict
	covered := map[string]state.Intervals{}
	rows := map[string][]testkit.VersionRow{}
	for _, id := range r.forms {
		covered[id] = testkit.Covered(t, r.w.State, id)
		if want := (state.Interval{Start: r.start, End: r.end}); !covered[id].Covers(want) {
			t.Errorf("round %d: form %s: committed windows %v do not cover %v", r.round, id, covered[id], want)
		}
		j, _ := sim.Journal(id)
		table := poller.DefaultTable(id)
		// A pass may reconcile too (when a kill stopped the pass that
		// started the version index before it recorded the reconcile's
		// time): judge counts the rows of the passes' batches.
		rows[id] = duck.VersionRows(t, dir, table)
		got := passCounts(rows[id])
		served := j.Pages
		// Pages of a reconcile a pass ran are no pass's walk.
		if kept := passWalkPages(id, j.Pages, rows[id], lookback); len(kept) < len(j.Pages) {
			w := judge(formsim.FormJournal{Pages: slices.Clone(j.Pages), Subs: j.Subs}, covered[id], got)
			t.Logf("round %d: form %s: a pass reconciled; %d pages of its reconcile set aside (judged with them: %d missing, %d unexpected)",
				r.round, id, len(j.Pages)-len(kept), w.Missing, w.Unexpected)
			j.Pages = kept
		}
		fv := judge(j, covered[id], got)
		if fv.Missing+fv.Unexpected > 0 {
			r.debugMissing(id, formsim.FormJournal{Pages: served, Subs: j.Subs}, covered[id], got, rows[id])
		}
		if r.round == 1 && fv.Expected > 0 {
			selfCheck(t, j, covered[id], got, fv)
		}
		fv.add(judgePassVersions(rows[id], j.Subs, before[id], after[id], lo, hi))
		v.add(fv)
		if r.lake == nil {
			checkTypes(t, duck, dir, table)
		}
	}
	r.verdict(tl, "pass", v)

	// 2. Changes, then a reconcile of each form, killed.
	r.change(tl, 8, 4, 4)
	svc := r.snapshot()
	v = verdict{}
	for _, id := range r.forms {
		from, where := r.reconcileFrom()
		tl.froms[where]++
		r.finish(tl, cmdReconcile, []string{cmdReconcile, "--form", id, "--from", from.Format(time.RFC3339)}, true)
		j, _ := sim.Journal(id)
		dir := r.output()
		now := duck.VersionRows(t, dir, poller.DefaultTable(id))
		v.add(judgeVersions(versionCheck{Subs: j.Subs, Before: rows[id], After: now, Service: svc[id], Reach: clip(covered[id], from)}))
		rows[id] = now
	}
	r.verdict(tl, "reconcile", v)

	// 3. Settle: faults off, a pass and a reconcile of everything, then the
	// latest view must be the service.
	sim.SetFaults(formsim.Faults{})
	r.finish(tl, cmdOnce, []string{cmdOnce}, false)
	for _, id := range r.forms {
		r.finish(tl, cmdReconcile, []string{cmdReconcile, "--form", id, "--from", r.start.AddDate(0, 0, -1).Format(time.RFC3339)}, false)
	}
	svc = r.snapshot()
	dir = r.output()
	v = verdict{}
	for _, id := range r.forms {
		j, _ := sim.Journal(id)
		table := poller.DefaultTable(id)
		fv := judgeVersions(versionCheck{Subs: j.Subs, Before: rows[id], After: duck.VersionRows(t, dir, table), Service: svc[id], Reach: testkit.Covered(t, r.w.State, id)})
		if n := duck.DuplicateVersions(t, dir, table); n != fv.DupVersions {
			t.Errorf("form %s: DuckDB counts %d duplicated versions, the judge %d", id, n, fv.DupVersions)
		}
		fv.LatestDiff += latestDiff(&fv, duck.LatestView(t, dir, table, r.start.AddDate(0, 0, -1)), finishedOnly(svc[id], j.Subs))
		v.add(fv)
	}
	r.verdict(tl, "settled", v)
	for k, n := range sim.Stats().Injected {
		tl.simFaults[k] += n
	}
	t.Logf("round %d %-8s fault %-15s kills %3d", r.round, r.mode, orNone(r.fault), r.kills)
}

// verdict adds a phase's verdict to the table and fails the round when it
// is not exact.
func (r *roundRun) verdict(tl *tally, phase string, v verdict) {
	tl.v.add(v)
	r.t.Logf("round %d %s: expected %d found %d dup %d missing %d unexpected %d either-way %d; versions %d tombstones %d dup %d missing %d unexpected %d latest-diff %d",
		r.round, phase, v.Expected, v.Found, v.Duplicated, v.Missing, v.Unexpected, v.Ambiguous, v.Versions, v.Tombstones, v.DupVersions, v.MissingVersions, v.UnexpectedVersions, v.LatestDiff)
	if !v.ok() {
		if r.lake != nil {
			r.t.Logf("objects in the bucket, to tell which batches overlap: %v", r.lake.Keys(r.t, r.prefix))
		}
		r.t.Fatalf("round %d: output after the %s phase is not exactly once: %+v\nexamples:\n  %s\nrerun with SYNCD_CHAOS_SEED=%d", r.round, phase, v, strings.Join(v.Examples, "\n  "), r.p.Seed)
	}
}

// latestDiff compares the latest view DuckDB computes with sink.LatestQuery
// with the service: the count of submissions that differ, named in v's
// examples.
func latestDiff(v *verdict, got map[string]int64, want map[string]testkit.SimVersion) int {
	n := 0
	for id, sv := range want {
		if g, ok := got[id]; !ok || g != sv.Updated {
			n++
			v.example("latest view (DuckDB): %s has %s (present %t), the service %s", id, us(g), ok, us(sv.Updated))
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			n++
			v.example("latest view (DuckDB) holds %s, which the service does not list", id)
		}
	}
	return n
}

// finishedOnly keeps the live finished submissions (the journal's) of a
// service snapshot.
func finishedOnly(svc map[string]testkit.SimVersion, subs []formsim.JournalSub) map[string]testkit.SimVersion {
	out := map[string]testkit.SimVersion{}
	for _, s := range subs {
		if sv, ok := svc[s.ID]; ok && s.Deleted == 0 {
			out[s.ID] = sv
		}
	}
	return out
}

// clip is the part of committed windows from from on: what a reconcile
// --from re-reads.
func clip(covered state.Intervals, from time.Time) state.Intervals {
	var out state.Intervals
	for _, iv := range covered {
		if iv.End.After(from) {
			out = append(out, state.Interval{Start: maxTime(iv.Start, from), End: iv.End})
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// snapshot reads every checked form's versions from the service.
func (r *roundRun) snapshot() map[string]map[string]testkit.SimVersion {
	out := map[string]map[string]testkit.SimVersion{}
	for _, id := range r.forms {
		out[id] = testkit.SimVersions(r.t, r.sim, id)
	}
	return out
}

// output is a local folder holding the round's output as it is now.
func (r *roundRun) output() string {
	if r.lake == nil {
		return r.w.Out
	}
	r.outs++
	dir := filepath.Join(r.t.TempDir(), fmt.Sprintf("out%d", r.outs))
	r.lake.Download(r.t, r.prefix, dir)
	return dir
}

// reconcileFrom picks a reconcile's --from: before all history, in the
// history before the lookback, or inside the lookback.
func (r *roundRun) reconcileFrom() (time.Time, string) {
	edge := r.end.Add(-lookback + 2*time.Hour) // inside now - lookback, whatever the hour
	switch r.rng.IntN(3) {
	case 0:
		return r.start.AddDate(0, 0, -1).Truncate(time.Second), fromBeforeAll
	case 1:
		return r.start.Add(time.Duration(r.rng.Int64N(int64(edge.Sub(r.start) - 4*time.Hour)))).Truncate(time.Second), fromBeforeLookback
	default:
		return edge.Add(time.Duration(r.rng.Int64N(int64(r.end.Sub(edge))))).Truncate(time.Second), fromInLookback
	}
}

// change makes edits, deletions and back-dated imports in every checked
// form, spread over the whole history (before the lookback and inside it):
// up to n of each.
func (r *roundRun) change(tl *tally, edits, deletions, imports int) {
	t := r.t
	for _, form := range r.forms {
		ids := r.sim.ExpectedIDsBetween(form, r.start, r.end)
		r.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ne, nd := min(edits, len(ids)), min(deletions, max(len(ids)-edits, 0))
		for _, id := range ids[:ne] {
			if err := r.sim.Edit(form, id); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids[ne : ne+nd] {
			if err := r.sim.Delete(form, id); err != nil {
				t.Fatal(err)
			}
		}
		times := make([]time.Time, imports)
		for i := range times {
			times[i] = r.start.Add(time.Duration(r.rng.Int64N(int64(r.end.Sub(r.start)))))
		}
		if _, err := r.sim.Insert(form, times...); err != nil {
			t.Fatal(err)
		}
		tl.changes[0] += ne
		tl.changes[1] += nd
		tl.changes[2] += imports
	}
}

// exec runs syncd once, killed after delay (0: never).
func (r *roundRun) exec(tl *tally, cmd string, delay time.Duration, args ...string) testkit.Result {
	r.sim.NextEpoch()
	tl.runs++
	tl.byCmd[cmd].runs++
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := testkit.RunKilledAfter(ctx, syncdBin, r.w, delay, args...)
	r.logs = append(r.logs, fmt.Sprintf("=== run %d %v delay %s killed %t code %d\n%s\n%s", len(r.logs)+1, args, delay, res.Killed, res.Code, res.Stdout, res.Stderr))
	if res.Killed {
		r.kills++
		tl.kills++
		tl.byCmd[cmd].kills++
	}
	return res
}

// finish runs a command, killing it at random instants (when kill is set
// and its uninterrupted duration is known), until a run exits; it must
// exit 0. In the pass phase, edits, deletions and back-dated imports
// happen between runs.
func (r *roundRun) finish(tl *tally, cmd string, args []string, kill bool) {
	t := r.t
	if kill {
		tl.byCmd[cmd].loops++
	}
	for attempt := 0; ; attempt++ {
		if attempt > 400 {
			t.Fatalf("round %d: %s never finished after %d attempts", r.round, cmd, attempt)
		}
		if attempt > 0 && cmd != cmdReconcile && kill && r.rng.IntN(2) == 0 {
			r.change(tl, 2, 1, 1)
		}
		var delay time.Duration
		if kill && r.full[cmd] > 0 && (cmd != cmdReconcile || attempt < maxReconcileKills) {
			// Every sixth kill in a row doubles the span the instant is
			// drawn from: a run whose start alone outlasts the span (a
			// loaded machine, a slow store) still finishes.
			delay = r.killDelay(cmd) << min(attempt/6, 8)
		}
		began := time.Now()
		res := r.exec(tl, cmd, delay, args...)
		if res.Killed {
			continue
		}
		if kill && delay == 0 && r.full[cmd] == 0 {
			r.full[cmd] = time.Since(began)
		}
		if res.Code != 0 {
			t.Fatalf("round %d: %s exited %d after %d kills\nstdout: %s\nstderr: %s", r.round, strings.Join(args, " "), res.Code, r.kills, res.Stdout, tail(res.Stderr))
		}
		return
	}
}

// selfCheck proves, on real output, that the check can fail: a duplicated
// row, a stranger and an empty table are each caught.
func selfCheck(t *testing.T, j formsim.FormJournal, covered state.Intervals, got map[string]int, base verdict) {
	t.Helper()
	dup := maps.Clone(got)
	for id := range dup {
		dup[id]++
		break
	}
	dup["not-a-submission"] = 1
	if v := judge(j, covered, dup); v.Duplicated != base.Duplicated+1 || v.Unexpected != base.Unexpected+1 {
		t.Errorf("self-check: a duplicate and a stranger gave %+v", v)
	}
	if v := judge(j, covered, map[string]int{}); v.Missing != base.Expected {
		t.Errorf("self-check: an empty table is missing %d of %d expected", v.Missing, base.Expected)
	}
}

// killDelay is a random instant in the first killFrac of an uninterrupted
// run of cmd: a restarted run resumes, so kills late in the work still
// happen, and a round lands several before a run outlives its delay.
func (r *roundRun) killDelay(cmd string) time.Duration {
	return time.Duration(r.rng.Int64N(int64(float64(r.full[cmd])*r.killFrac)+1)) + time.Millisecond
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
