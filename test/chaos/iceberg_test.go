package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/icebergrest"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/testkit/icejudge"
)

// icebergLanes are the catalogs and warehouses of TestChaosIceberg: each
// catalog on a local warehouse, and the embedded and PostgreSQL catalogs
// on buckets (the REST fake takes a local warehouse; Azure is left out,
// README, Iceberg).
var icebergLanes = []struct{ catalog, warehouse string }{
	{icejudge.SQLite, icejudge.Local},
	{icejudge.Postgres, icejudge.Local},
	{icejudge.REST, icejudge.Local},
	{icejudge.SQLite, icejudge.S3},
	{icejudge.Postgres, icejudge.GS},
}

// icebergMaxKillsPerLoop bounds the kills of one run-until-finished loop:
// then the run goes on unkilled, so that each phase of a round finishes.
const icebergMaxKillsPerLoop = 4

// icebergTally is one lane's line of the table.
type icebergTally struct {
	lane                    string
	rounds, kills, runs     int
	killsBy                 map[string]int // by command
	changes                 [3]int         // edits, deletions, back-dated imports between runs
	restInjected, restFired int
	v                       icejudge.Verdict
	took                    time.Duration
}

// TestChaosIceberg is the campaign on the Iceberg sink, lane by lane
// (catalog sqlite, postgres, rest; warehouse local, s3 in versitygw, gs in
// fake-gcs-server). A round, in a fresh simulator and installation:
//  1. `syncd once` killed with SIGKILL at random instants and rerun until
//     it finishes, with edits, deletions and back-dated imports in the
//     simulator between the runs;
//  2. more edits, deletions and back-dated imports, then `once` again,
//     killed the same way;
//  3. `syncd reconcile --form F --from <start>` for each form, killed at
//     random instants until it finishes (the service standing still);
//  4. the judge: icebird reads both tables of each form through the
//     catalog syncd committed to: every version at most once in <table>,
//     every submission of the committed windows live in it, each one's
//     current version there, and <table>_latest equal to the service.
//
// On the REST lane the catalog fake also fails one to three commits a
// round (a 409 conflict, a 503 after the commit, a connection cut after
// the commit).
//
// SYNCD_CHAOS_ICEBERG_KILLS is the SIGKILLs to land across the lanes
// (default 5, a round a lane; make chaos: 1000), SYNCD_CHAOS_ICEBERG_SUBMISSIONS the
// submissions per form of a round (default 150), SYNCD_CHAOS_FORMS the
// forms; SYNCD_CHAOS_SEED reruns a campaign.
func TestChaosIceberg(t *testing.T) {
	p := loadParams()
	kills := envInt("SYNCD_CHAOS_ICEBERG_KILLS", 5)
	subs := envInt("SYNCD_CHAOS_ICEBERG_SUBMISSIONS", 150)
	t.Logf("seed %d (rerun with SYNCD_CHAOS_SEED=%d SYNCD_CHAOS_ICEBERG_KILLS=%d SYNCD_CHAOS_ICEBERG_SUBMISSIONS=%d SYNCD_CHAOS_FORMS=%d)",
		p.Seed, p.Seed, kills, subs, p.Forms)
	perLane := (kills + len(icebergLanes) - 1) / len(icebergLanes)
	var tallies []*icebergTally
	defer func() { t.Log("\n" + icebergTable(p, subs, tallies)) }()
	for i, ln := range icebergLanes {
		tl := &icebergTally{lane: ln.catalog + "/" + ln.warehouse, killsBy: map[string]int{}}
		tallies = append(tallies, tl)
		ok := t.Run(ln.catalog+"-"+ln.warehouse, func(t *testing.T) {
			began := time.Now()
			defer func() { tl.took = time.Since(began) }()
			lane := icejudge.StartLane(t, ln.catalog, ln.warehouse)
			// Maintenance after nearly every pass (compaction, expiry down
			// to two snapshots, orphan cleanup), so that kills land in it
			// too, and batches are found again after their snapshots are
			// expired.
			lane.Maintenance = "    compact_every: 1s\n    expire_after: 2s\n    keep_snapshots: 2\n"
			rng := rand.New(rand.NewPCG(p.Seed, 0x1ceb0+uint64(i)))
			full := map[string]time.Duration{}
			for round := 1; round == 1 || tl.kills < perLane; round++ {
				if round > 4+perLane {
					t.Fatalf("%d rounds did not land %d kills (%d landed; seed %d)", round-1, perLane, tl.kills, p.Seed)
				}
				passed := t.Run(fmt.Sprintf("round%03d", round), func(t *testing.T) {
					r := &icebergRound{t: t, p: p, subs: subs, rng: rng, lane: lane, full: full, tl: tl}
					r.run()
				})
				tl.rounds++
				if !passed {
					t.Fatalf("%s round %d failed; rerun with SYNCD_CHAOS_SEED=%d and the same sizes", tl.lane, round, p.Seed)
				}
			}
		})
		if !ok {
			return
		}
	}
}

// icebergRound is one round of a lane.
type icebergRound struct {
	t    *testing.T
	p    params
	subs int
	rng  *rand.Rand
	lane *icejudge.Lane
	full map[string]time.Duration // an uninterrupted run, by phase
	tl   *icebergTally

	sim        *testkit.Sim
	w          *testkit.Workdir
	in         icejudge.Installation
	start, end time.Time
}

func (r *icebergRound) run() {
	t := r.t
	r.start, r.end = icebergHistory()
	r.sim = testkit.StartSim(t, formsim.Config{Seed: r.rng.Int64N(1 << 40), Forms: r.p.Forms, Submissions: r.subs, Start: r.start, End: r.end})
	r.in = r.lane.Install(t)
	if r.in.REST != nil {
		all := []icebergrest.Fault{icebergrest.Conflict, icebergrest.UnavailableAfterCommit, icebergrest.CutAfterCommit}
		r.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		faults := all[:1+r.rng.IntN(len(all))]
		r.in.REST.InjectCommitFaults(nil, faults...)
		r.tl.restInjected += len(faults)
		defer func() { r.tl.restFired += len(faults) - r.in.REST.PendingFaults() }()
	}
	r.w = testkit.NewWorkdir(t, r.sim.BaseURL, testkit.Config{LogLevel: "warn", Sink: r.in.Sink,
		Sync: "  safety_lag: 0s\n  max_rows_per_batch: 100\n  concurrency: 2\n"})

	// 1. The first pass, changes between its runs.
	r.loop("once", true, "once")
	// 2. Changes, and an incremental pass.
	r.change()
	r.loop("once-again", true, "once")
	// 3. A reconcile of each form from the start.
	for _, form := range r.sim.FormIDs() {
		r.loop("reconcile", false, "reconcile", "--form", form, "--from", r.start.Format(time.RFC3339))
	}
	// 4. The judge.
	v := icejudge.Check(t, r.in.Reader, r.sim, r.w.State, icejudge.Options{From: r.start, CurrentVersions: true})
	r.tl.v.Add(v)
}

// icebergHistory is a year of history ending an hour ago.
func icebergHistory() (time.Time, time.Time) {
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	return end.AddDate(-1, 0, 0), end
}

// loop runs syncd args, killed at random instants of an uninterrupted run
// of phase (its first run in the lane is that run), until one finishes;
// with changes, the simulator changes between a kill and the next run.
func (r *icebergRound) loop(phase string, changes bool, args ...string) {
	t := r.t
	ctx := context.Background()
	for kills := 0; ; {
		var delay time.Duration
		if full := r.full[phase]; full > 0 && kills < icebergMaxKillsPerLoop {
			delay = time.Duration(r.rng.Int64N(int64(full)+1)) + time.Millisecond
		}
		began := time.Now()
		res := testkit.RunEnvKilledAfter(ctx, syncdBin, r.w, r.in.Env, delay, args...)
		r.tl.runs++
		if res.Killed {
			kills++
			r.tl.kills++
			r.tl.killsBy[args[0]]++
			if changes && r.rng.IntN(2) == 0 {
				r.change()
			}
			continue
		}
		if res.Code != 0 {
			t.Fatalf("syncd %s exited %d after %d kills of this loop (seed %d)\nstdout:\n%s\nstderr:\n%s",
				strings.Join(args, " "), res.Code, kills, r.p.Seed, tail(res.Stdout), tail(res.Stderr))
		}
		if r.full[phase] == 0 {
			r.full[phase] = time.Since(began)
			t.Logf("%s: an uninterrupted %s takes %s", r.lane.Name(), phase, r.full[phase].Round(time.Millisecond))
		}
		return
	}
}

// change edits, deletes and imports (back-dated) a few submissions of
// each form.
func (r *icebergRound) change() {
	t := r.t
	for _, form := range r.sim.FormIDs() {
		ids := r.sim.ExpectedIDs(form)
		if len(ids) == 0 {
			continue
		}
		for range 1 + r.rng.IntN(4) {
			if err := r.sim.Edit(form, ids[r.rng.IntN(len(ids))]); err != nil {
				t.Fatal(err)
			}
			r.tl.changes[0]++
		}
		for range r.rng.IntN(3) {
			i := r.rng.IntN(len(ids))
			if ids[i] == "" {
				continue
			}
			if err := r.sim.Delete(form, ids[i]); err != nil {
				t.Fatal(err)
			}
			ids[i] = ""
			r.tl.changes[1]++
		}
		span := r.end.Sub(r.start)
		n := 1 + r.rng.IntN(3)
		times := make([]time.Time, n)
		for i := range times {
			times[i] = r.start.Add(time.Duration(r.rng.Int64N(int64(span))))
		}
		if _, err := r.sim.Insert(form, times...); err != nil {
			t.Fatal(err)
		}
		r.tl.changes[2] += n
	}
}

func icebergTable(p params, subs int, tallies []*icebergTally) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Iceberg chaos campaign, seed %d (SYNCD_CHAOS_SEED=%d reruns it), %d forms x %d submissions a round\n", p.Seed, p.Seed, p.Forms, subs)
	b.WriteString("| catalog/warehouse | seed | rounds | kills (once/reconcile) | runs | edits/deletions/imports | REST faults injected/fired | submissions | versions checked | latest rows checked | duplicates | missing | missing current versions | unexpected | latest-table differences | time |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var sum icebergTally
	sum.killsBy = map[string]int{}
	for _, tl := range tallies {
		icebergRow(&b, p, tl)
		sum.rounds += tl.rounds
		sum.kills += tl.kills
		sum.runs += tl.runs
		for k, n := range tl.killsBy {
			sum.killsBy[k] += n
		}
		for i := range sum.changes {
			sum.changes[i] += tl.changes[i]
		}
		sum.restInjected += tl.restInjected
		sum.restFired += tl.restFired
		sum.v.Add(tl.v)
		sum.took += tl.took
	}
	sum.lane = "all"
	icebergRow(&b, p, &sum)
	return b.String()
}

func icebergRow(b *strings.Builder, p params, tl *icebergTally) {
	v := tl.v
	fmt.Fprintf(b, "| %s | %d | %d | %d (%d/%d) | %d | %d/%d/%d | %d/%d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
		tl.lane, p.Seed, tl.rounds, tl.kills, tl.killsBy["once"], tl.killsBy["reconcile"], tl.runs,
		tl.changes[0], tl.changes[1], tl.changes[2], tl.restInjected, tl.restFired,
		v.Submissions, v.Versions, v.Latest, v.Duplicates, v.Missing, v.MissingVersions, v.Unexpected, v.LatestDiff, tl.took.Round(time.Second))
}
