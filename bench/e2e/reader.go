package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/table"
)

// The reader scenario (issue 40, "A reader gets a few well-sized files"):
// a sparse account (by default 30 forms of 300 submissions over
// 2021-01-01..2026-11-01, formsim's seed 1) synced by `syncd once` with
// the default config (no partition line unless -partition), then read
// with DuckDB in this process: the files and bytes a reader gets, and the
// time of count(*), count(DISTINCT submission_id) and of a materialised
// SELECT * over every table, against the same rows in one file per table
// (DuckDB's COPY, zstd). Every table must hold each of its form's ids
// once.

// readerTable is one table of the output: its folder and what it holds.
type readerTable struct {
	name, dir string
	layout    string // day, month, year or none, from its folders
	files     int
	bytes     int64
	paths     []string // an Iceberg table's current data files (dir is then unused)
}

// src is the table as DuckDB reads it: the Parquet folder's files, the
// one file, or an Iceberg table's current data files.
func (t readerTable) src() string {
	if t.paths == nil {
		return readParquet(tableGlob(t.dir))
	}
	q := make([]string, len(t.paths))
	for i, p := range t.paths {
		q[i] = "'" + sqlQuote(p) + "'"
	}
	return fmt.Sprintf("read_parquet([%s], union_by_name=true)", strings.Join(q, ", "))
}

// readerTimes are the fastest and slowest of the runs of a query over
// every table (the sum over the tables of each run).
type readerTimes struct{ best, worst time.Duration }

func (t readerTimes) String() string {
	return fmt.Sprintf("%s (worst %s)", fmtDur(t.best), fmtDur(t.worst))
}

func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func reader(ctx context.Context, bin string, forms, subs int, startS, endS string, runs int) {
	start, err := time.Parse(time.RFC3339, startS)
	if err != nil {
		fatalf("-reader-start: %v", err)
	}
	end, err := time.Parse(time.RFC3339, endS)
	if err != nil {
		fatalf("-reader-end: %v", err)
	}
	// Seed 1 is formsim's default: the account of the issue.
	s := startSim(formsim.Config{Seed: 1, Forms: forms, Submissions: subs, Start: start, End: end})
	defer s.stop()
	want := map[string]int{} // table (syncd's default name of a form's table) -> submissions
	total := 0
	for _, id := range s.FormIDs() {
		n := len(s.ExpectedIDs(id))
		want["form_"+table.SanitizeName(id)] = n
		total += n
	}
	dir, err := os.MkdirTemp("", "syncd-bench-reader-")
	if err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	cfg := writeConfig(dir, s.base, 10_000, "")
	r := runSyncd(ctx, bin, cfg, "once")
	var tables []readerTable
	var others int
	var ice []icebergTable
	if sinkKind == "iceberg" {
		tables, ice = readerIceberg(ctx, bin, cfg, dir)
	} else {
		tables, others = readerTables(filepath.Join(dir, "out"))
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		fatalf("duckdb: %v", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: the temp tables live in it
	var threads int
	if err := db.QueryRow("SELECT current_setting('threads')").Scan(&threads); err != nil {
		fatalf("duckdb: %v", err)
	}

	// Exactness: every table holds each id of its form once.
	exactness := func(tables []readerTable) (bad int) {
		for _, t := range tables {
			var n, distinct int64
			if err := db.QueryRow("SELECT count(*), count(DISTINCT submission_id) FROM "+t.src()).Scan(&n, &distinct); err != nil {
				fatalf("reader: count %s: %v", t.name, err)
			}
			w, ok := want[t.name]
			if !ok || n != int64(w) || distinct != int64(w) {
				fmt.Fprintf(os.Stderr, "bench/e2e: reader: table %s: %d rows, %d distinct ids, the simulator holds %d (known form: %v)\n", t.name, n, distinct, w, ok)
				bad++
			}
		}
		if len(tables) != len(want) {
			fmt.Fprintf(os.Stderr, "bench/e2e: reader: %d tables, %d forms\n", len(tables), len(want))
			bad++
		}
		return bad
	}
	bad := exactness(tables)

	// The same rows, one file per table.
	one := filepath.Join(dir, "onefile")
	if err := os.MkdirAll(one, 0o755); err != nil {
		fatalf("%v", err)
	}
	var oneTables []readerTable
	for _, t := range tables {
		dst := filepath.Join(one, t.name+".parquet")
		if _, err := db.Exec(fmt.Sprintf("COPY (SELECT * FROM %s) TO '%s' (FORMAT parquet, COMPRESSION zstd)", t.src(), sqlQuote(dst))); err != nil {
			fatalf("reader: copy %s: %v", t.name, err)
		}
		info, err := os.Stat(dst)
		if err != nil {
			fatalf("%v", err)
		}
		oneTables = append(oneTables, readerTable{name: t.name, dir: dst, files: 1, bytes: info.Size(), paths: []string{dst}})
	}

	measure := func(ts []readerTable) (count, star readerTimes) {
		for i := 0; i < runs; i++ {
			var c, a time.Duration
			for _, t := range ts {
				src := t.src()
				t0 := time.Now()
				var n, distinct int64
				if err := db.QueryRow("SELECT count(*), count(DISTINCT submission_id) FROM "+src).Scan(&n, &distinct); err != nil {
					fatalf("reader: count %s: %v", t.name, err)
				}
				c += time.Since(t0)
				t0 = time.Now()
				if _, err := db.Exec("CREATE TEMP TABLE x AS SELECT * FROM " + src); err != nil {
					fatalf("reader: select * %s: %v", t.name, err)
				}
				if _, err := db.Exec("DROP TABLE x"); err != nil {
					fatalf("reader: %v", err)
				}
				a += time.Since(t0)
			}
			if i == 0 || c < count.best {
				count.best = c
			}
			if i == 0 || a < star.best {
				star.best = a
			}
			count.worst, star.worst = max(count.worst, c), max(star.worst, a)
		}
		return count, star
	}
	// Interleaved would be fairer on a shared machine; the runs are short
	// and the fastest of each is kept.
	syncdCount, syncdStar := measure(tables)
	oneCount, oneStar := measure(oneTables)

	sum := func(ts []readerTable) (files int, bytes int64, lay string) {
		layouts := map[string]int{}
		for _, t := range ts {
			files += t.files
			bytes += t.bytes
			layouts[t.layout]++
		}
		var l []string
		for _, k := range slices.Sorted(maps.Keys(layouts)) {
			l = append(l, fmt.Sprintf("%s %d", k, layouts[k]))
		}
		return files, bytes, strings.Join(l, ", ")
	}
	files, bytes, lay := sum(tables)
	_, oneBytes, _ := sum(oneTables)
	ratio := func(star readerTimes) string {
		x := star.best.Seconds() / oneStar.best.Seconds()
		if sinkKind == "iceberg" && x > 1.5 {
			return fmt.Sprintf("**%.1fx** (over the 1.5x bar)", x)
		}
		return fmt.Sprintf("**%.1fx**", x)
	}
	exactS := func(bad int) string {
		if bad > 0 {
			return fmt.Sprintf("**no** (%d tables wrong)", bad)
		}
		return "yes"
	}

	if sinkKind == "iceberg" {
		fmt.Printf("## Reader: a sparse account, `syncd once`, read by DuckDB (Iceberg sink, local warehouse, sqlite catalog)\n\n")
		fmt.Printf("%d forms x %d submissions over %s..%s (%d submissions, formsim seed 1); syncd %s. The versions table of each form (`form_<id>`; `<table>_latest` aside): its current snapshot's data files, as iceberg-go plans a scan of it through the sqlite catalog after syncd exits. DuckDB %d threads, in-process; each query over every table (one query per table, `read_parquet([<the data files>], union_by_name=true)`), fastest of %d runs; `SELECT *` is `CREATE TEMP TABLE x AS SELECT * ...`.\n\n",
			forms, subs, startS, endS, total, bin, threads, runs)
	} else {
		fmt.Printf("## Reader: a sparse account, `syncd once`, read by DuckDB (sink.parquet.partition: %s)\n\n", partitionName())
		fmt.Printf("%d forms x %d submissions over %s..%s (%d submissions, formsim seed 1); syncd %s. DuckDB %d threads, in-process; each query over every table (one query per table, `read_parquet('<table>/**/*.parquet', hive_partitioning=true, union_by_name=true)`), fastest of %d runs; `SELECT *` is `CREATE TEMP TABLE x AS SELECT * ...`.\n\n",
			forms, subs, startS, endS, total, bin, threads, runs)
	}
	fmt.Printf("syncd once: wall %.1f s, CPU (user+sys) %.2f s (%.3f CPU-s per 1,000 submissions), peak RSS %.0f MB. Tables by layout: %s.",
		r.wall.Seconds(), r.cpu.Seconds(), r.cpu.Seconds()/(float64(total)/1000), float64(r.maxRSS)/(1<<20), lay)
	if others > 0 {
		fmt.Printf(" Files other than .parquet in the output: %d.", others)
	}
	fmt.Println()
	fmt.Println()
	if sinkKind == "iceberg" {
		var vSnaps, lSnaps, lData, lDel int64
		for _, t := range ice {
			if strings.HasSuffix(t.Table, icebergsink.LatestSuffix) {
				lSnaps += int64(t.Snapshots)
				lData += t.DataFiles
				lDel += t.DeleteFiles
			} else {
				vSnaps += int64(t.Snapshots)
			}
		}
		commits := vSnaps + lSnaps
		fmt.Printf("Commits (snapshots in the tables' metadata after `syncd once`: a batch commits once to its versions table and once to its latest table): %d to the versions tables, %d to the latest tables. syncd logs no commit duration; "+
			"**time per commit: syncd once's wall / commits = %.0f ms** (fetching, encoding and the sqlite catalog's commit included; a throughput figure, not one commit's latency: streams commit sync.concurrency at a time); CPU per commit %.0f ms. The latest tables after `syncd once`: %d data files, %d delete files.\n\n",
			vSnaps, lSnaps, 1000*r.wall.Seconds()/float64(max(commits, 1)), 1000*r.cpu.Seconds()/float64(max(commits, 1)), lData, lDel)
	}
	fmt.Println("| output | tables | files | bytes | syncd CPU | DuckDB `count(*), count(DISTINCT submission_id)` | DuckDB `SELECT *` | `SELECT *` / one file | exact |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	name := "syncd, partition: " + partitionName()
	if sinkKind == "iceberg" {
		name = "syncd once, Iceberg versions tables"
	}
	fmt.Printf("| %s | %d | %d | %.2f MB | %.2f s | %s | %s | %s | %s |\n",
		name, len(tables), files, float64(bytes)/1e6, r.cpu.Seconds(), syncdCount, syncdStar, ratio(syncdStar), exactS(bad))
	if sinkKind == "iceberg" {
		// syncd compact, then the same reads.
		rc := runSyncd(ctx, bin, cfg, "compact")
		tables2, ice2 := readerIceberg(ctx, bin, cfg, dir)
		bad2 := exactness(tables2)
		bad += bad2
		c2, s2 := measure(tables2)
		files2, bytes2, lay2 := sum(tables2)
		fmt.Printf("| after `syncd compact` (wall %.1f s, peak RSS %.0f MB; layout: %s) | %d | %d | %.2f MB | %.2f s (compact) | %s | %s | %s | %s |\n",
			rc.wall.Seconds(), float64(rc.maxRSS)/(1<<20), lay2, len(tables2), files2, float64(bytes2)/1e6, rc.cpu.Seconds(), c2, s2, ratio(s2), exactS(bad2))
		defer func() {
			var lData, lDel int64
			for _, t := range ice2 {
				if strings.HasSuffix(t.Table, icebergsink.LatestSuffix) {
					lData += t.DataFiles
					lDel += t.DeleteFiles
				}
			}
			fmt.Printf("After `syncd compact` the latest tables hold %d data files, %d delete files.\n\n", lData, lDel)
		}()
	}
	fmt.Printf("| the same rows, one file per table (DuckDB `COPY`, zstd) | %d | %d | %.2f MB | | %s | %s | 1.0x | |\n\n",
		len(oneTables), len(oneTables), float64(oneBytes)/1e6, oneCount, oneStar)
	if bad > 0 {
		fatalf("reader: the output is not exact (see above)")
	}
}

// readerIceberg lists the versions tables of the Iceberg output of the run
// in dir (syncd tables -o json) with their current data files.
func readerIceberg(ctx context.Context, bin, cfg, dir string) ([]readerTable, []icebergTable) {
	ice := icebergTables(ctx, bin, cfg, []string{"FORMS_API_KEY=" + apiKey})
	var tables []readerTable
	for _, t := range ice {
		if strings.HasSuffix(t.Table, icebergsink.LatestSuffix) {
			continue
		}
		paths, bytes := icebergDataFiles(ctx, dir, t.Table)
		if int64(len(paths)) != t.DataFiles {
			fmt.Fprintf(os.Stderr, "bench/e2e: reader: %s: %d data files planned, syncd tables says %d\n", t.Table, len(paths), t.DataFiles)
		}
		tables = append(tables, readerTable{name: t.Table, layout: t.Partitioning, files: len(paths), bytes: bytes, paths: paths})
	}
	slices.SortFunc(tables, func(a, b readerTable) int { return strings.Compare(a.name, b.name) })
	return tables, ice
}

// readerTables finds the tables under out: a table is the folder above
// its Hive partition folders (name=value), or the folder of its files.
// others counts the files that are not Parquet.
func readerTables(out string) (tables []readerTable, others int) {
	byDir := map[string]*readerTable{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(p, ".parquet") {
			others++
			return nil
		}
		rel, err := filepath.Rel(out, p)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
		root, layout := parts, "none"
		for i, part := range parts {
			if k, _, ok := strings.Cut(part, "="); ok {
				root = parts[:i]
				switch {
				case strings.HasSuffix(k, "_date"):
					layout = "day"
				case strings.HasSuffix(k, "_month"):
					layout = "month"
				case strings.HasSuffix(k, "_year"):
					layout = "year"
				default:
					layout = k
				}
				break
			}
		}
		dir := filepath.Join(append([]string{out}, root...)...)
		t := byDir[dir]
		if t == nil {
			t = &readerTable{name: filepath.Base(dir), dir: dir, layout: layout}
			byDir[dir] = t
		}
		if t.layout != layout {
			t.layout = "mixed"
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		t.files++
		t.bytes += info.Size()
		return nil
	})
	if err != nil {
		fatalf("reader: walk %s: %v", out, err)
	}
	for _, t := range byDir {
		tables = append(tables, *t)
	}
	slices.SortFunc(tables, func(a, b readerTable) int { return strings.Compare(a.name, b.name) })
	return tables, others
}

func tableGlob(dir string) string { return filepath.Join(dir, "**", "*.parquet") }

func readParquet(glob string) string {
	return fmt.Sprintf("read_parquet('%s', hive_partitioning=true, union_by_name=true)", sqlQuote(glob))
}

func sqlQuote(s string) string { return strings.ReplaceAll(s, "'", "''") }
