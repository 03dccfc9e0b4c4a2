package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
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

// tally is the campaign's table.
type tally struct {
	rounds, kills, runs int
	byMode              map[string][2]int // rounds, kills
	faults              map[string]int    // sink and state faults injected, by kind
	detected            map[string]int    // ... that syncd refused with a clear error
	simFaults           map[formsim.FaultKind]int64
	v                   verdict
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
	tl := tally{byMode: map[string][2]int{}, faults: map[string]int{}, detected: map[string]int{}, simFaults: map[formsim.FaultKind]int64{}}
	sinkKinds := []string{faultDiskFull, faultReadOnly, faultStateTruncated, faultStateCorrupted}
	if !mounts {
		sinkKinds = []string{faultStateTruncated, faultStateCorrupted}
	}
	// How long an uninterrupted run of each mode takes bounds the kill
	// instants; measured by each mode's first round, which is not killed.
	full := map[string]time.Duration{}
	sinkRounds := len(sinkKinds) * max(1, p.Kills/100)
	sinkRound := 0
	for round := 1; tl.kills < p.Kills || round <= 2 || sinkRound < sinkRounds; round++ {
		if round > p.MaxRounds+sinkRounds*p.SinkEvery {
			t.Fatalf("%d rounds did not land %d kills (%d landed)", round-1, p.Kills, tl.kills)
		}
		mode := "once"
		if round%2 == 0 {
			mode = "backfill"
		}
		fault := ""
		if round > 2 && (round-3)%p.SinkEvery == 0 && sinkRound < sinkRounds {
			fault = sinkKinds[sinkRound%len(sinkKinds)]
			sinkRound++
		}
		var (
			v     verdict
			kills int
		)
		// A subtest per round: its folders and mounts go when it ends.
		passed := t.Run(fmt.Sprintf("round%03d-%s-%s", round, mode, orNone(fault)), func(t *testing.T) {
			r := &roundRun{t: t, p: p, rng: rng, mode: mode, fault: fault, round: round, full: full[mode], mounts: mounts}
			v, kills = r.run(&tl)
			if full[mode] == 0 {
				full[mode] = r.measured
			}
			if !v.ok() {
				t.Fatalf("output is not exactly once: %+v\nexamples:\n  %s", v, strings.Join(v.Examples, "\n  "))
			}
		})
		m := tl.byMode[mode]
		tl.byMode[mode] = [2]int{m[0] + 1, m[1] + kills}
		tl.rounds++
		tl.kills += kills
		tl.v.add(v)
		if !passed {
			t.Fatalf("round %d (%s, fault %q) failed; rerun with SYNCD_CHAOS_SEED=%d and the same sizes", round, mode, orNone(fault), p.Seed)
		}
	}
	t.Log("\n" + tl.table(p))
}

func (tl *tally) table(p params) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos campaign, seed %d, %d forms x %d submissions\n", p.Seed, p.Forms, p.Submissions)
	fmt.Fprintf(&b, "| rounds | kills | runs | once rounds/kills | backfill rounds/kills |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d/%d | %d/%d |\n\n", tl.rounds, tl.kills, tl.runs,
		tl.byMode["once"][0], tl.byMode["once"][1], tl.byMode["backfill"][0], tl.byMode["backfill"][1])
	fmt.Fprintf(&b, "| sink/state fault | injected | refused with a clear error |\n|---|---|---|\n")
	for _, k := range []string{faultDiskFull, faultReadOnly, faultStateTruncated, faultStateCorrupted} {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", k, tl.faults[k], tl.detected[k])
	}
	fmt.Fprintf(&b, "\n| simulator fault | injected |\n|---|---|\n")
	for _, k := range []formsim.FaultKind{formsim.FaultServerError, formsim.FaultRateLimit, formsim.FaultSlow, formsim.FaultTruncated,
		formsim.FaultMalformed, formsim.FaultBadValue, formsim.FaultChurn, formsim.FaultArrival, formsim.FaultBackdated,
		formsim.FaultEdit, formsim.FaultDelete} {
		fmt.Fprintf(&b, "| %s | %d |\n", k, tl.simFaults[k])
	}
	v := tl.v
	fmt.Fprintf(&b, "\n| submissions expected | found | duplicated | missing | unexpected | either way (deleted while walked) | import+delete cancelling behind the offset | exported then deleted (kept) | imported after commit (not seen) |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", v.Expected, v.Found, v.Duplicated, v.Missing, v.Unexpected, v.Ambiguous, v.Cancelled, v.Deleted, v.Late)
	return b.String()
}

// roundRun is one round: a fresh simulator and installation, runs of one
// mode killed at random instants until one finishes, maybe a sink or state
// fault, then the check.
type roundRun struct {
	t        *testing.T
	p        params
	rng      *rand.Rand
	mode     string
	fault    string
	round    int
	full     time.Duration
	measured time.Duration
	mounts   bool
}

func (r *roundRun) run(tl *tally) (verdict, int) {
	t := r.t
	end := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	start := end.AddDate(0, 0, -6)
	sim := testkit.StartSim(t, formsim.Config{Seed: int64(r.p.Seed%100000) + int64(r.round), Forms: r.p.Forms, Submissions: r.p.Submissions,
		Start: start, End: end, InclusiveDates: r.round%3 == 0})
	sim.EnableJournal()
	sim.SetFaults(allFaults())
	forms := sim.FormIDs()
	args := []string{"once"}
	cfg := testkit.Config{Sync: "  safety_lag: 0s\n  max_rows_per_batch: 120\n  concurrency: 2\n", LogLevel: "warn"}
	checkForms := forms
	if r.mode == "backfill" {
		form := forms[r.rng.IntN(len(forms))]
		args = []string{"backfill", "--form", form, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339), "--concurrency", "3"}
		cfg.Forms = "forms:\n  - id: " + form + "\n"
		checkForms = []string{form}
	}
	w := testkit.NewWorkdir(t, sim.BaseURL, cfg)
	var out *tmpfs
	if r.fault == faultDiskFull || r.fault == faultReadOnly {
		out = mountTmpfs(t, w.Out)
	}
	ctx := context.Background()
	kills := 0
	exec := func(delay time.Duration) testkit.Result {
		sim.NextEpoch()
		tl.runs++
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		return testkit.RunKilledAfter(rctx, syncdBin, w, delay, args...)
	}
	// finish runs syncd, killing it at random instants, until a run exits.
	finish := func(killsAllowed int) testkit.Result {
		for attempt := 0; ; attempt++ {
			if attempt > 400 {
				t.Fatalf("round %d: %s never finished after %d attempts", r.round, r.mode, attempt)
			}
			var delay time.Duration
			if r.full > 0 && kills < killsAllowed {
				delay = r.killDelay()
			}
			began := time.Now()
			res := exec(delay)
			if res.Killed {
				kills++
				continue
			}
			if delay == 0 && r.measured == 0 {
				r.measured = time.Since(began)
			}
			return res
		}
	}
	budget := r.p.Kills // a round lands kills until its run finishes
	if r.fault != "" {
		// A few kills first, so the fault meets open intents and
		// half-written batches, then the fault, then the rest.
		if r.full > 0 {
			for range 1 + r.rng.IntN(3) {
				if res := exec(r.killDelay()); res.Killed {
					kills++
				}
			}
		}
		r.inject(tl, w, out, exec)
	}
	res := finish(budget)
	if res.Code != 0 {
		t.Fatalf("round %d: %s exited %d after %d kills\nstdout: %s\nstderr: %s", r.round, r.mode, res.Code, kills, res.Stdout, tail(res.Stderr))
	}
	st := sim.Stats()
	for k, n := range st.Injected {
		tl.simFaults[k] += n
	}
	var v verdict
	duck := testkit.OpenDuck(t)
	for _, id := range checkForms {
		covered := testkit.Covered(t, w.State, id)
		want := state.Interval{Start: start, End: end}
		if !covered.Covers(want) {
			t.Errorf("round %d: form %s: committed windows %v do not cover %v", r.round, id, covered, want)
		}
		j, _ := sim.Journal(id)
		table := poller.DefaultTable(id)
		got := duck.IDCounts(t, w.Out, table)
		fv := judge(j, covered, got)
		v.add(fv)
		v.Examples = append(v.Examples, fv.Examples...)
		if r.round == 1 && fv.Expected > 0 {
			selfCheck(t, j, covered, got, fv)
		}
		checkTypes(t, duck, w.Out, table)
	}
	t.Logf("round %d %-8s fault %-15s kills %3d: expected %d found %d dup %d missing %d unexpected %d either-way %d",
		r.round, r.mode, orNone(r.fault), kills, v.Expected, v.Found, v.Duplicated, v.Missing, v.Unexpected, v.Ambiguous)
	return v, kills
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

// killDelay is a random instant in the first half of an uninterrupted
// run: a restarted run resumes, so kills late in the work still happen, and
// a round lands several before a run outlives its delay.
func (r *roundRun) killDelay() time.Duration {
	return time.Duration(r.rng.Int64N(int64(r.full/2)+1)) + time.Millisecond
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
