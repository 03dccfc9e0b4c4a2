package testkit

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Seed is the seed of a randomized test: $env when set, else the clock. It
// is logged with the variable that replays it.
func Seed(t testing.TB, env string) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv(env), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (rerun with %s=%d)", seed, env, seed)
	return seed
}

// Attempt is one run of a kill loop.
type Attempt struct {
	Round, Try int
	// Full is how long an uninterrupted run took: kill instants are drawn
	// below it. 0 for the probe, which must not be killed.
	Full time.Duration
	Rng  *rand.Rand
}

// Delay is a random kill instant in the first Frac of an uninterrupted run
// (Frac 0 means all of it), or 0 (no kill) for the probe.
func (a Attempt) Delay(frac float64) time.Duration {
	if a.Full <= 0 {
		return 0
	}
	if frac <= 0 || frac > 1 {
		frac = 1
	}
	return time.Duration(a.Rng.Int64N(int64(float64(a.Full)*frac)+1)) + time.Millisecond
}

// KillLoop kills a syncd command with SIGKILL at random instants and reruns
// it until it finishes, round after round, each round in a fresh
// installation, until enough kills have landed; after every finished round
// its check must pass. The first round is the probe: it runs uninterrupted,
// and its duration bounds the kill instants of the others.
type KillLoop struct {
	Seed   uint64 // from Seed; each KillLoop of a test takes its own Stream
	Stream uint64
	Kills  int // SIGKILLs to land in all (see CrashKills)
	// Round sets up round r (0 is the probe) and returns run, which runs
	// the command once (killing it as the attempt says), and check, called
	// once a run finished.
	Round func(t *testing.T, r int) (run func(a Attempt) Result, check func(t *testing.T))
	// Retry, when set, names a finished run that is rerun rather than
	// failing the test (a dead run's lease not yet expired).
	Retry func(res Result) bool
	// Done, when set, replaces "Kills have landed" as the end.
	Done      func(kills int) bool
	MaxRounds int // default 40
	MaxTries  int // per round, default 300
}

// KillStats is what a kill loop did.
type KillStats struct {
	Kills, Rounds, Retries int
	Full                   time.Duration
}

// CrashKills is how many kills a crash test lands: n, or more with
// SYNCD_CRASH_KILLS.
func CrashKills(n int) int {
	if k, err := strconv.Atoi(os.Getenv("SYNCD_CRASH_KILLS")); err == nil && k > n {
		return k
	}
	return n
}

// Run runs the loop; a round that fails stops the test, naming the seed.
func (k KillLoop) Run(t *testing.T) KillStats {
	t.Helper()
	rng := rand.New(rand.NewPCG(k.Seed, k.Stream))
	maxRounds, maxTries := k.MaxRounds, k.MaxTries
	if maxRounds == 0 {
		maxRounds = 40
	}
	if maxTries == 0 {
		maxTries = 300
	}
	done := k.Done
	if done == nil {
		done = func(kills int) bool { return kills >= k.Kills }
	}
	var st KillStats
	for r := 0; r == 0 || !done(st.Kills); r++ {
		if r > maxRounds {
			t.Fatalf("%d kills after %d rounds: the loop did not finish (seed %d)", st.Kills, r-1, k.Seed)
		}
		run, check := k.Round(t, r)
		for try := 0; ; try++ {
			if try > maxTries {
				t.Fatalf("round %d never finished after %d runs (seed %d)", r, try, k.Seed)
			}
			began := time.Now()
			res := run(Attempt{Round: r, Try: try, Full: st.Full, Rng: rng})
			if r == 0 {
				if res.Killed || res.Code != 0 {
					t.Fatalf("the uninterrupted probe run exited %d: %s", res.Code, tail(res.Stderr))
				}
				st.Full = time.Since(began)
				t.Logf("an uninterrupted run takes %s", st.Full)
				break
			}
			if res.Killed {
				st.Kills++
				continue
			}
			if k.Retry != nil && k.Retry(res) {
				st.Retries++
				continue
			}
			if res.Code != 0 {
				t.Fatalf("round %d: exited %d after %d kills in all (seed %d): %s", r, res.Code, st.Kills, k.Seed, tail(res.Stderr))
			}
			break
		}
		check(t)
		if t.Failed() {
			t.Fatalf("round %d failed after %d kills in all; rerun with its seed %d", r, st.Kills, k.Seed)
		}
		st.Rounds = r
	}
	t.Logf("%d kills over %d rounds (%d reruns), output exact after every round", st.Kills, st.Rounds, st.Retries)
	return st
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
