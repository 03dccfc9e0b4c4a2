package sinktest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/sinktest"
)

// The suite's own tests, as the store and source suites have: each runs
// the suite over a disk sink broken on purpose, in a child process (a
// failing suite fails its *testing.T), and checks that the cases meant to
// catch the breakage fail while they pass over the unbroken sink.

const brokenEnv = "SINKTEST_BROKEN"

// breakages are the broken sinks, by name, and the cases that must fail.
var breakages = map[string][]string{
	"none":         nil,                                  // the control
	"double-write": {"Replay"},                           // a replay writes the batch again, under another name
	"yes-man":      {"WholeOrNothing", "Replay"},         // Committed says yes to every batch
	"lossy":        {"WholeOrNothing", "Replay"},         // each chunk loses its last row
	"keeps-stale":  {"StoppedAttempt"},                   // the files of b.Stale stay
	"torn":         {"WholeOrNothing", "StoppedAttempt"}, // a failed part leaves its rows visible
}

// TestBrokenSink runs the suite over the breakage named in brokenEnv; it
// is the child of TestSuiteCatchesBrokenSinks and does nothing unless
// that names one.
func TestBrokenSink(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return
	}
	if _, ok := breakages[name]; !ok {
		t.Fatalf("no breakage %q", name)
	}
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return &brokenSink{diskSink: newDiskSink(t), kind: name}
	})
}

func TestSuiteCatchesBrokenSinks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite once per breakage")
	}
	run := func(name string) map[string]bool {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenSink$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), brokenEnv+"="+name)
		out, _ := cmd.CombinedOutput()
		failed := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: TestBrokenSink/"); ok {
				failed[strings.Split(strings.Fields(f)[0], "/")[0]] = true
			}
		}
		if !strings.Contains(string(out), "TestBrokenSink/Replay") {
			t.Fatalf("breakage %s: the suite did not run:\n%s", name, out)
		}
		return failed
	}
	control := run("none")
	if len(control) > 0 {
		t.Fatalf("cases failing over the unbroken disk sink: %v", control)
	}
	for name, want := range breakages {
		if name == "none" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			failed := run(name)
			for _, c := range want {
				if !failed[c] {
					t.Errorf("breakage %s: case %s passed, want it to fail", name, c)
				}
			}
		})
	}
}

// brokenSink is the disk sink with one fault of kind.
type brokenSink struct {
	*diskSink
	kind string
}

func (b *brokenSink) Commit(ctx context.Context, bt sink.Batch, parts sink.Parts) (int64, error) {
	switch b.kind {
	case "double-write":
		if ok, err := b.diskSink.Committed(ctx, bt); err == nil && ok {
			bt.ID += "again"
		}
	case "keeps-stale":
		bt.Stale = nil
	case "lossy":
		parts = mapParts(parts, func(each func(func(arrow.Record) error) error) func(func(arrow.Record) error) error {
			return func(fn func(arrow.Record) error) error {
				return each(func(rec arrow.Record) error {
					if rec.NumRows() < 2 {
						return fn(rec)
					}
					s := rec.NewSlice(0, rec.NumRows()-1)
					defer s.Release()
					return fn(s)
				})
			}
		})
	case "torn":
		// A part whose rows fail is committed with the rows read so far.
		parts = mapParts(parts, func(each func(func(arrow.Record) error) error) func(func(arrow.Record) error) error {
			return func(fn func(arrow.Record) error) error {
				_ = each(fn)
				return nil
			}
		})
	}
	return b.diskSink.Commit(ctx, bt, parts)
}

func (b *brokenSink) Committed(ctx context.Context, bt sink.Batch) (bool, error) {
	if b.kind == "yes-man" {
		return true, nil
	}
	return b.diskSink.Committed(ctx, bt)
}

// mapParts replaces the Each of every part.
func mapParts(parts sink.Parts, f func(func(func(arrow.Record) error) error) func(func(arrow.Record) error) error) sink.Parts {
	out := make(sink.Parts, len(parts))
	for i, p := range parts {
		p.Records.Each = f(p.Records.Each)
		out[i] = p
	}
	return out
}
