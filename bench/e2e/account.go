package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
)

// The account scenarios measure what a real account costs in requests,
// which at the service's 5 requests/s are the user's wait: most forms are
// sparse (a few hundred submissions over years), a few dense.

// accountShapes are sparse forms of 100-500 submissions over 3 years and
// dense ones of denseSubs over 70 days.
func accountShapes(end time.Time, sparse, dense, denseSubs int) []formsim.FormShape {
	r := rand.New(rand.NewPCG(5, 5))
	var shapes []formsim.FormShape
	for i := 0; i < dense; i++ {
		shapes = append(shapes, formsim.FormShape{Submissions: denseSubs, Start: end.AddDate(0, 0, -70)})
	}
	for i := 0; i < sparse; i++ {
		shapes = append(shapes, formsim.FormShape{Submissions: 100 + r.IntN(401), Start: end.AddDate(-3, 0, 0)})
	}
	return shapes
}

// ideal is the fewest requests that read n submissions: its pages, and the
// form's metadata.
func ideal(n int) int { return (n+149)/150 + 1 }

// account syncs an account for the first time and reports requests against
// the ideal, the wall time those requests take at 5 requests/s, the files
// written; then a pass with nothing new, and one with a few new.
func account(ctx context.Context, bin string, sparse, dense, denseSubs int) {
	_, end := history()
	shapes := accountShapes(end, sparse, dense, denseSubs)
	s := startSim(formsim.Config{Seed: 9, Forms: len(shapes), Shapes: shapes, End: end})
	defer s.stop()
	dir, err := os.MkdirTemp("", "syncd-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	cfg := writeConfig(dir, s.base, 10_000, "  concurrency: 8\n")
	total, idealSum := 0, 0
	for _, id := range s.FormIDs() {
		n := len(s.ExpectedIDs(id))
		total += n
		idealSum += ideal(n)
	}
	idealSum++ // listing the account's forms
	measure := func(args ...string) result {
		before := s.Stats().Requests
		r := runSyncd(ctx, bin, cfg, args...)
		r.requests = s.Stats().Requests - before
		return r
	}
	first := measure("once")
	files := countFiles(filepath.Join(dir, "out"))
	second := measure("once")
	files2 := countFiles(filepath.Join(dir, "out")) - files
	for i, id := range s.FormIDs() {
		if i%10 == 0 {
			if _, err := s.Insert(id, time.Now()); err != nil {
				fatalf("insert: %v", err)
			}
		}
	}
	time.Sleep(20 * time.Millisecond) // past the new submissions' time
	third := measure("once")
	files3 := countFiles(filepath.Join(dir, "out")) - files - files2
	fmt.Printf("## Account: %d sparse forms (100-500 submissions over 3 years) and %d dense (%d over 70 days), %d submissions, sink.parquet.partition: %s\n\n", sparse, dense, denseSubs, total, partitionName())
	fmt.Println("| pass | requests | ideal (pages + metadata per form, + 1 listing) | requests / ideal | at 5 req/s | files | wall here (no limit) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	fmt.Printf("| first sync | %d | %d | %.3f | %s | %d | %.1f s |\n", first.requests, idealSum, float64(first.requests)/float64(idealSum),
		(time.Duration(first.requests) * 200 * time.Millisecond).Round(time.Second), files, first.wall.Seconds())
	fmt.Printf("| nothing new | %d | %d | | %s | %d | %.1f s |\n", second.requests, len(shapes)+1,
		(time.Duration(second.requests) * 200 * time.Millisecond).Round(time.Second), files2, second.wall.Seconds())
	fmt.Printf("| 1 new in every 10th form | %d | | | %s | %d | %.1f s |\n\n", third.requests,
		(time.Duration(third.requests) * 200 * time.Millisecond).Round(time.Second), files3, third.wall.Seconds())
}

// reconcileCost measures a reconcile of a 30-day lookback with nothing
// changed and with 1% of the lookback's submissions edited.
func reconcileCost(ctx context.Context, bin string, sparse, dense, denseSubs int) {
	_, end := history()
	shapes := accountShapes(end, sparse, dense, denseSubs)
	s := startSim(formsim.Config{Seed: 10, Forms: len(shapes), Shapes: shapes, End: end})
	defer s.stop()
	dir, err := os.MkdirTemp("", "syncd-bench-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	// reconcile_every 0: every pass reconciles.
	cfg := writeConfig(dir, s.base, 10_000, "  concurrency: 8\n  lookback: 30d\n  reconcile_every: 0s\n")
	runSyncd(ctx, bin, cfg, "once")
	lookback := 0
	for _, id := range s.FormIDs() {
		lookback += len(s.ExpectedIDsBetween(id, time.Now().AddDate(0, 0, -30), end))
	}
	measure := func() result {
		before := s.Stats().Requests
		r := runSyncd(ctx, bin, cfg, "once")
		r.requests = s.Stats().Requests - before
		return r
	}
	unchanged := measure()
	edited := 0
	for _, id := range s.FormIDs() {
		ids := s.ExpectedIDsBetween(id, time.Now().AddDate(0, 0, -30), end)
		for i := 0; i < len(ids); i += 100 {
			if err := s.Edit(id, ids[i]); err != nil {
				fatalf("edit: %v", err)
			}
			edited++
		}
	}
	changed := measure()
	what := fmt.Sprintf("%d sparse forms", sparse)
	if dense > 0 {
		what = fmt.Sprintf("%d form of %d submissions over 70 days", dense, denseSubs)
	}
	fmt.Printf("## Reconcile of a 30-day lookback: %s (%d submissions in the lookback)\n\n", what, lookback)
	fmt.Println("| once (its live pass, 1 request a form and the listing, then the reconcile) | requests | requests per 150 in the lookback | at 5 req/s | wall here |")
	fmt.Println("|---|---|---|---|---|")
	for i, r := range []result{unchanged, changed} {
		label := []string{"nothing changed", fmt.Sprintf("1%% edited (%d)", edited)}[i]
		fmt.Printf("| %s | %d | %.2f | %s | %.1f s |\n", label, r.requests, float64(r.requests)/max(1, float64(lookback)/150),
			(time.Duration(r.requests) * 200 * time.Millisecond).Round(time.Second), r.wall.Seconds())
	}
	fmt.Println()
}

func countFiles(root string) int {
	n := 0
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return nil
	})
	return n
}
