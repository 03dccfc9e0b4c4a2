package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	_ "github.com/marcboeker/go-duckdb" // the anchor: DuckDB's own JSON -> Parquet

	"github.com/syncd-dev/syncd/internal/formsim"
)

// The cpu scenario (issue 25) compares syncd end to end with DuckDB in
// CPU-seconds, the measure that decides how many accounts a pod serves: the
// same finished submissions of one form, written once by the simulator,
// (a) served over loopback to `syncd backfill` (the built binary, rate
// limit off, concurrency 2: HTTP, page decoding, planning, the spool, state
// and the files), and (b) saved as the simulator's JSON pages and converted
// by DuckDB (read_json into a COPY ... TO Parquet, zstd, 1 thread). Each
// side is a child process; its CPU is user+sys from rusage (syncd's whole
// process; DuckDB's conversion alone, measured around the COPY inside the
// child so that loading the library is not counted).

// duckChildArg, as the first argument, makes this binary the DuckDB child:
// duckChildArg GLOB DST; it prints "rows user_ns sys_ns".
const duckChildArg = "duckdb-child"

// cpuForm is one form of the comparison.
type cpuForm struct {
	name      string
	index     int // form index in the simulator
	subs      int
	questions int
}

type cpuResult struct {
	duckCPU, syncdUser, syncdSys, syncdWall time.Duration
	duckRows, syncdRows                     int64
	duckBytes, syncdBytes                   int64 // of the Parquet files written
	maxRSS                                  int64
}

// cpuCompare runs the comparison for the forms named in only (all when
// empty), runs times each (the least CPU of the runs is kept: the machine
// is shared, and interference only ever adds), and prints a table. With
// profDir set, one more syncd run per form is profiled into
// profDir/<form>.pprof through syncd's --pprof.
//
// lookback, when set, is written as sync.lookback (the default, 30 days,
// keeps a version index of every row in the state: "0s" measures syncd
// without it).
func cpuCompare(ctx context.Context, bin string, subs, wideSubs, runs int, only, profDir, lookback string) {
	extra := ""
	if lookback != "" {
		extra = "  lookback: " + lookback + "\n"
	}
	start, end := history()
	all := []cpuForm{
		{name: "narrow", index: 1, subs: subs},
		{name: "realistic", index: 2, subs: subs},
		{name: "wide", index: 0, subs: wideSubs},
	}
	// Form 2 asks 20 questions of everyday types; form 1 is a narrow form
	// (6-10 questions), form 0 the wide one (every documented type).
	shapes := []formsim.FormShape{{Submissions: wideSubs}, {Submissions: subs}, {Submissions: subs, Questions: 20}}
	s := startSim(formsim.Config{Seed: 25, Forms: len(shapes), Shapes: shapes, Submissions: subs, Start: start, End: end})
	defer s.stop()
	if profDir != "" {
		if err := os.MkdirAll(profDir, 0o755); err != nil {
			fatalf("cpu: %v", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		fatalf("cpu: own executable: %v", err)
	}
	fmt.Printf("## CPU-seconds end to end: syncd backfill vs DuckDB (best of %d)\n\n", runs)
	if lookback != "" {
		fmt.Printf("syncd with sync.lookback: %s\n\n", lookback)
	}
	fmt.Println("| form | questions | submissions | JSON | DuckDB CPU | syncd CPU (user + sys) | syncd wall | syncd peak RSS | Parquet: DuckDB / syncd | DuckDB CPU / syncd CPU |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range all {
		if only != "" && !strings.Contains(","+only+",", ","+f.name+",") {
			continue
		}
		id := s.FormIDs()[f.index]
		meta, _ := s.Form(id)
		f.questions = len(meta.Questions)
		dir, err := os.MkdirTemp("", "syncd-bench-cpu-")
		if err != nil {
			fatalf("%v", err)
		}
		want := int64(len(s.ExpectedIDs(id)))
		jsonBytes := savePages(s, filepath.Join(dir, "pages"), id, want)
		var best cpuResult
		for i := 0; i < runs; i++ {
			r := cpuOnce(ctx, self, bin, s, dir, id, start, end, extra, "")
			if r.duckRows != want || r.syncdRows != want {
				fatalf("cpu %s: DuckDB wrote %d rows, syncd %d, the simulator holds %d", f.name, r.duckRows, r.syncdRows, want)
			}
			if i == 0 || r.duckCPU < best.duckCPU {
				best.duckCPU = r.duckCPU
			}
			if i == 0 || r.syncdUser+r.syncdSys < best.syncdUser+best.syncdSys {
				best.syncdUser, best.syncdSys, best.syncdWall, best.maxRSS = r.syncdUser, r.syncdSys, r.syncdWall, r.maxRSS
			}
			best.duckBytes, best.syncdBytes = r.duckBytes, r.syncdBytes
		}
		syncdCPU := best.syncdUser + best.syncdSys
		fmt.Printf("| %s | %d | %d | %.0f MB | %.2f s | %.2f s (%.2f + %.2f) | %.2f s | %.0f MB | %.1f / %.1f MB | **%.2fx** |\n",
			f.name, f.questions, want, float64(jsonBytes)/1e6, best.duckCPU.Seconds(), syncdCPU.Seconds(),
			best.syncdUser.Seconds(), best.syncdSys.Seconds(), best.syncdWall.Seconds(), float64(best.maxRSS)/(1<<20),
			float64(best.duckBytes)/1e6, float64(best.syncdBytes)/1e6,
			best.duckCPU.Seconds()/syncdCPU.Seconds())
		if profDir != "" {
			cpuOnce(ctx, self, bin, s, dir, id, start, end, extra, filepath.Join(profDir, f.name+".pprof"))
		}
		_ = os.RemoveAll(dir)
	}
	fmt.Println()
}

// savePages writes the form's finished submissions as the simulator serves
// them to syncd (pages of 150, oldest first), one file a page, and returns
// their size.
func savePages(s *sim, dir, formID string, n int64) int64 {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	var total int64
	for off, i := int64(0), 0; off < n; off, i = off+150, i+1 {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/forms/%s/submissions?limit=150&offset=%d&sort=asc", s.base, formID, off), nil)
		if err != nil {
			fatalf("%v", err)
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fatalf("cpu: fetch page at %d: %v", off, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			fatalf("cpu: fetch page at %d: %d %v", off, resp.StatusCode, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("page-%06d.json", i)), body, 0o644); err != nil {
			fatalf("%v", err)
		}
		total += int64(len(body))
	}
	return total
}

// cpuOnce runs DuckDB's conversion, then syncd's backfill, each in its own
// child. prof, when set, is a file for a CPU profile of syncd (DuckDB is
// then skipped, and nothing measured).
func cpuOnce(ctx context.Context, self, bin string, s *sim, dir, formID string, start, end time.Time, extraSync, prof string) cpuResult {
	var r cpuResult
	if prof == "" {
		r.duckCPU, r.duckRows = duckChild(ctx, self, filepath.Join(dir, "pages", "*.json"), filepath.Join(dir, "duck.parquet"))
		r.duckBytes = treeBytes(filepath.Join(dir, "duck.parquet"))
	}
	run := filepath.Join(dir, "run")
	_ = os.RemoveAll(run)
	if err := os.MkdirAll(run, 0o755); err != nil {
		fatalf("%v", err)
	}
	defer os.RemoveAll(run)
	cfg := writeConfig(run, s.base, 10_000, extraSync)
	args := []string{"backfill", "--form", formID, "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339),
		"--concurrency", "2", "--config", cfg}
	profFile := prof
	if prof != "" {
		args = append(args, "--pprof", freeAddr())
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "FORMS_API_KEY="+apiKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		fatalf("cpu: start syncd: %v", err)
	}
	rss := watchRSS(cmd.Process.Pid)
	profDone, exited := make(chan error, 1), make(chan struct{})
	if prof != "" {
		go func() { profDone <- fetchProfile(ctx, args[len(args)-1], exited, profFile) }()
	}
	err := cmd.Wait()
	r.syncdWall = time.Since(t0)
	close(exited)
	if err != nil {
		fatalf("cpu: syncd backfill: %v\n%s", err, tail(stderr.String()))
	}
	if prof != "" {
		if err := <-profDone; err != nil {
			fmt.Fprintf(os.Stderr, "bench/e2e: cpu profile %s: %v\n", profFile, err)
		} else {
			fmt.Fprintf(os.Stderr, "bench/e2e: cpu profile: %s\n", profFile)
		}
		return r
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.syncdUser, r.syncdSys = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
	r.maxRSS = rss.peak(ru.Maxrss * 1024)
	r.syncdRows = countParquetRows(filepath.Join(run, "out"))
	r.syncdBytes = treeBytes(filepath.Join(run, "out"))
	return r
}

// treeBytes is the size of the .parquet files at or under path.
func treeBytes(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// freeAddr is a loopback address nothing listens on (a race with another
// process taking it is harmless here: syncd would fail and say so).
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("listen: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fetchProfile waits for syncd's pprof listener, then takes CPU profiles of
// a second each until syncd exits (done), and merges them into file with
// go tool pprof. One long profile would be lost whole if syncd exited
// before its end; slices lose at most the last second.
func fetchProfile(ctx context.Context, addr string, done <-chan struct{}, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=1", addr)
	var slices []string
	up := false
	for i := 0; ; i++ {
		select {
		case <-done:
			return mergeProfiles(slices, file)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if up {
				return mergeProfiles(slices, file) // syncd exited during a slice
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		up = true
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return mergeProfiles(slices, file)
		}
		slice := fmt.Sprintf("%s.%03d", file, i)
		if err := os.WriteFile(slice, body, 0o644); err != nil {
			return err
		}
		slices = append(slices, slice)
		saveHeap(ctx, addr, strings.TrimSuffix(file, ".pprof")+".heap.pprof")
	}
}

// saveHeap replaces file with syncd's heap profile: the last one taken
// before syncd exits holds what it allocated in all (alloc_space) and what
// it held at that moment (inuse_space).
func saveHeap(ctx context.Context, addr, file string) {
	if body := heapProfile(ctx, addr, ""); body != nil {
		_ = os.WriteFile(file, body, 0o644)
	}
}

// mergeProfiles writes the slices as one profile into file.
func mergeProfiles(slices []string, file string) error {
	if len(slices) == 0 {
		return errors.New("no profile taken: syncd exited first")
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"tool", "pprof", "-proto"}, slices...)...)
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("merge %d profiles: %w: %s", len(slices), err, stderr.String())
	}
	for _, s := range slices {
		_ = os.Remove(s)
	}
	return nil
}

// countParquetRows counts the rows syncd wrote (with DuckDB, not measured).
func countParquetRows(out string) int64 {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		fatalf("duckdb: %v", err)
	}
	defer db.Close()
	var n int64
	glob := strings.ReplaceAll(filepath.Join(out, "**", "*.parquet"), "'", "''")
	if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", glob)).Scan(&n); err != nil {
		fatalf("count syncd's rows: %v", err)
	}
	return n
}

// duckChild runs this binary as the DuckDB child and returns the CPU its
// conversion took and the rows it wrote.
func duckChild(ctx context.Context, self, glob, dst string) (time.Duration, int64) {
	out, err := exec.CommandContext(ctx, self, duckChildArg, glob, dst).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		fatalf("cpu: DuckDB child: %v\n%s", err, tail(stderr))
	}
	var rows, user, sys int64
	if _, err := fmt.Sscan(string(out), &rows, &user, &sys); err != nil {
		fatalf("cpu: DuckDB child said %q: %v", out, err)
	}
	return time.Duration(user + sys), rows
}

// duckChildMain is the child: one DuckDB thread converts the pages at glob
// into dst, the anchor query of bench/conversion_test.go (one row per
// submission, columns and types inferred by read_json, zstd).
func duckChildMain(glob, dst string) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		fatalf("duckdb: %v", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET threads = 1"); err != nil {
		fatalf("duckdb: %v", err)
	}
	q := fmt.Sprintf(`COPY (SELECT unnest(r) FROM (SELECT unnest(responses) AS r FROM read_json('%s', maximum_object_size = 67108864)))
		TO '%s' (FORMAT parquet, COMPRESSION zstd)`, strings.ReplaceAll(glob, "'", "''"), strings.ReplaceAll(dst, "'", "''"))
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		fatalf("rusage: %v", err)
	}
	res, err := db.Exec(q)
	if err != nil {
		fatalf("duckdb: %v", err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		fatalf("rusage: %v", err)
	}
	rows, err := res.RowsAffected()
	if err != nil {
		fatalf("duckdb: rows: %v", err)
	}
	fmt.Println(rows, after.Utime.Nano()-before.Utime.Nano(), after.Stime.Nano()-before.Stime.Nano())
}
