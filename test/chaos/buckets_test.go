package chaos

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

// TestChaosBuckets is the campaign's rounds (roundRun: `once` killed at
// random instants under every simulator fault with changes between runs,
// then edits, deletions and back-dated imports and `syncd reconcile`
// killed at random instants, then a settling pass and reconcile; every
// phase judged) with the output in an S3 bucket (versitygw) and an Azure
// container (Azurite), one server per store and a prefix per round.
//
// SYNCD_CHAOS_BUCKET_KILLS and SYNCD_CHAOS_BUCKET_SUBMISSIONS size the s3
// rounds, SYNCD_CHAOS_AZBLOB_KILLS and SYNCD_CHAOS_AZBLOB_SUBMISSIONS the
// azblob ones (default: the bucket figures), SYNCD_CHAOS_BUCKET_KILL_PCT
// where in a run the kills land (the first N% of an uninterrupted run;
// default 50). make chaos raises them; make test runs a few kills.
func TestChaosBuckets(t *testing.T) {
	p := loadParams()
	bucketKills := envInt("SYNCD_CHAOS_BUCKET_KILLS", 4)
	bucketSubs := envInt("SYNCD_CHAOS_BUCKET_SUBMISSIONS", 200)
	sizes := map[string][2]int{
		"s3":     {bucketKills, bucketSubs},
		"azblob": {envInt("SYNCD_CHAOS_AZBLOB_KILLS", bucketKills), envInt("SYNCD_CHAOS_AZBLOB_SUBMISSIONS", bucketSubs)},
	}
	frac := float64(min(envInt("SYNCD_CHAOS_BUCKET_KILL_PCT", 50), 100)) / 100
	t.Logf("seed %d (rerun with SYNCD_CHAOS_SEED=%d SYNCD_CHAOS_BUCKET_KILLS=%d SYNCD_CHAOS_BUCKET_SUBMISSIONS=%d SYNCD_CHAOS_AZBLOB_KILLS=%d SYNCD_CHAOS_AZBLOB_SUBMISSIONS=%d SYNCD_CHAOS_BUCKET_KILL_PCT=%d SYNCD_CHAOS_FORMS=%d)",
		p.Seed, p.Seed, bucketKills, bucketSubs, sizes["azblob"][0], sizes["azblob"][1], int(frac*100), p.Forms)
	for i, scheme := range []string{"s3", "azblob"} {
		t.Run(scheme, func(t *testing.T) {
			kills, subs := sizes[scheme][0], sizes[scheme][1]
			sp := p
			sp.Submissions, sp.Kills = subs, kills
			rng := rand.New(rand.NewPCG(p.Seed, uint64(0xb0+i)))
			l := lakes.Start(t, scheme)
			tl := newTally()
			full := map[string]time.Duration{}
			began := time.Now()
			for round := 1; round <= 2 || tl.kills < kills; round++ {
				if round > 4+kills {
					t.Fatalf("%d rounds did not land %d kills (%d landed; seed %d)", round-1, kills, tl.kills, p.Seed)
				}
				passed := t.Run(fmt.Sprintf("round%03d", round), func(t *testing.T) {
					r := &roundRun{t: t, p: sp, rng: rng, mode: cmdOnce, round: round, full: full, killFrac: frac,
						lake: l, prefix: fmt.Sprintf("r%03d/lake/forms", round)}
					r.run(tl)
				})
				tl.rounds++
				if !passed {
					t.Fatalf("%s round %d failed; rerun with SYNCD_CHAOS_SEED=%d and the same sizes", scheme, round, p.Seed)
				}
			}
			took := time.Since(began)
			t.Logf("%s: %d kills in %d rounds, %s (%s a round, %s a kill)\n%s", scheme, tl.kills, tl.rounds, took.Round(time.Second),
				(took / time.Duration(tl.rounds)).Round(10*time.Millisecond), (took / time.Duration(max(tl.kills, 1))).Round(10*time.Millisecond), tl.table(sp, scheme))
		})
	}
}
