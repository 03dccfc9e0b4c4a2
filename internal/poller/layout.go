package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/state"
)

// LayoutError is a table whose files are partitioned one way while the
// config asks for another: readers' hive partitioning needs one layout per
// table, and files are never moved under a reader.
type LayoutError struct {
	Stream, Table string
	Have, Want    sink.Layout
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("%s: table %s is partitioned by %s but sink.parquet.partition says %s: set it to auto (each table keeps the layout it was written with) or %s, or run `syncd refresh --form %s` to write the table again by %s",
		e.Stream, e.Table, e.Have, e.Want, e.Have, e.Stream, e.Want)
}

// resolveLayout sets the layout of the stream's table for this pass, from
// what st records; a table written before layouts were recorded keeps the
// one its files show (day, the default then, when they show none). A
// new table's stays unset until its first batch chooses it (decideLayout),
// unless the config names one.
func (f *streamRun) resolveLayout(ctx context.Context, st state.StreamState) error {
	if !f.p.parted {
		return nil
	}
	want := f.p.opts.Layout
	have := sink.Layout(st.Layout)
	if have == "" && (st.Rows > 0 || st.Batches > 0 || len(st.Intents) > 0) {
		var err error
		if have, err = f.legacyLayout(ctx); err != nil {
			return err
		}
	}
	if have != "" && want != "" && have != want {
		return &LayoutError{Stream: f.key, Table: f.table, Have: have, Want: want}
	}
	if have == "" {
		have = want
	}
	f.layoutMu.Lock()
	f.layout = have
	f.layoutMu.Unlock()
	return nil
}

// legacyLayout is the layout of a table that an earlier version wrote
// without recording one: what its files show, else the config's, else
// day, the default of those versions.
func (f *streamRun) legacyLayout(ctx context.Context) (sink.Layout, error) {
	if lf, ok := f.p.sink.(sink.LayoutFinder); ok {
		l, err := lf.TableLayout(ctx, f.table, f.s.Columns().Time)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.key, err)
		}
		if l != "" {
			return l, nil
		}
	}
	if f.p.opts.Layout != "" {
		return f.p.opts.Layout, nil
	}
	return sink.LayoutDay, nil
}

// currentLayout is the table's layout; "" while a new table has not
// chosen one, or for a sink without partitions.
func (f *streamRun) currentLayout() sink.Layout {
	f.layoutMu.Lock()
	defer f.layoutMu.Unlock()
	return f.layout
}

// decideLayout chooses a new table's layout, once, from what planning
// knows when it first sees rows: rows records from first on, up to end.
// It returns the table's layout ("" for a sink without partitions).
func (f *streamRun) decideLayout(first, end time.Time, rows int) sink.Layout {
	if !f.p.parted {
		return ""
	}
	f.layoutMu.Lock()
	defer f.layoutMu.Unlock()
	if f.layout == "" {
		f.layout = sink.ChooseLayout(first, end, rows, f.p.opts.LayoutTarget)
		f.log.Info("table layout chosen from its density", zap.String(logkey.Layout, string(f.layout)), zap.Int(logkey.Rows, rows),
			zap.Time(logkey.First, first), zap.Time(logkey.Until, end), zap.Int(logkey.RowsPerPartitionTarget, f.p.opts.LayoutTarget))
	}
	return f.layout
}

// noteWindow chooses a new table's layout from the first window with
// rows planning emits: its count, from its first record on (a gap cut by
// Split chose it there already).
func (f *streamRun) noteWindow(w Window) {
	if w.Empty || f.currentLayout() != "" {
		return
	}
	first := w.Since
	if first.IsZero() {
		first = w.Start
	}
	f.decideLayout(first, w.End, max(w.Count, w.AtMost))
}

// partOf names a row's partition in the table's layout; nil for a sink
// without partitions.
func (f *streamRun) partOf() func(time.Time) string {
	l := f.currentLayout()
	if !f.p.parted || l == "" {
		return nil
	}
	return l.PartitionOf
}
