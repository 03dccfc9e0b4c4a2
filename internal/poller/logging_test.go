package poller

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/table"
)

// TestNoteStatsAggregates: a batch with hundreds of misfit values and
// dozens of new columns logs one line per column and one summary line,
// with the details at debug (schema.Describe keeps values out of them).
func TestNoteStatsAggregates(t *testing.T) {
	changes := make([]table.Change, 0, 49)
	for i := 0; i < 47; i++ {
		changes = append(changes, table.Change{Kind: table.ChangeAdded, Column: "q" + string(rune('a'+i%26)), Detail: "new question"})
	}
	changes = append(changes, table.Change{Kind: table.ChangeVariant, Column: "age__v_string"}, table.Change{Kind: table.ChangeVariant, Column: "score__v_string"})
	tests := []struct {
		name      string
		level     zapcore.Level
		st        table.Stats
		wantLines map[string]int // message prefix -> lines
	}{
		{"misfits at info", zapcore.InfoLevel, table.Stats{
			Misfits:        map[string]int{"email": 500, "age": 35},
			MisfitExamples: map[string]string{"email": "string(20 chars)", "age": "string(3 chars)"},
		}, map[string]int{"values did not fit": 2}},
		{"47 columns added at info", zapcore.InfoLevel, table.Stats{Changes: changes},
			map[string]int{"schema changed: 47 columns added, 2 type changes (variant columns)": 1, "schema change\x00": 0}},
		{"details at debug", zapcore.DebugLevel, table.Stats{Changes: changes},
			map[string]int{"schema changed: ": 1, "schema change\x00": 49}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(tt.level)
			f := &streamRun{p: New(nil, nil, Options{}), key: "f1", log: zap.New(core)}
			f.noteStats(f.log, tt.st)
			got := map[string]int{}
			for _, e := range logs.All() {
				for prefix := range tt.wantLines {
					exact, isExact := strings.CutSuffix(prefix, "\x00")
					if isExact && e.Message == exact || !isExact && strings.HasPrefix(e.Message, prefix) {
						got[prefix]++
					}
				}
			}
			for prefix, n := range tt.wantLines {
				if got[prefix] != n {
					t.Errorf("%d lines %q, want %d; all: %v", got[prefix], prefix, n, logs.All())
				}
			}
			if len(tt.st.Misfits) > 0 {
				if f.misfits.Load() != 535 {
					t.Errorf("misfits counted %d, want 535", f.misfits.Load())
				}
				e := logs.FilterField(zap.String("column", "email")).All()
				if len(e) != 1 || e[0].ContextMap()["values"] != int64(500) || e[0].ContextMap()["example"] != "string(20 chars)" {
					t.Errorf("the email line: %v", e)
				}
			}
		})
	}
}

func TestSummarizeChanges(t *testing.T) {
	tests := []struct {
		kinds []string
		want  string
	}{
		{[]string{table.ChangeAdded}, "1 column added"},
		{[]string{table.ChangeVariant, table.ChangeAdded, table.ChangeAdded}, "2 columns added, 1 type change (a variant column)"},
		{[]string{table.ChangeRenamed, table.ChangeTypeUpdated, "other"}, "1 question renamed (its column kept), 1 column type updated, 1 other"},
	}
	for _, tt := range tests {
		var cs []table.Change
		for _, k := range tt.kinds {
			cs = append(cs, table.Change{Kind: k})
		}
		if got := SummarizeChanges(cs); got != tt.want {
			t.Errorf("SummarizeChanges(%v) = %q, want %q", tt.kinds, got, tt.want)
		}
	}
}
