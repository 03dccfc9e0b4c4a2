package icebergsink

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/syncd-dev/syncd/internal/sink"
)

var _ sink.Lister = (*Sink)(nil)

// Tables describes every table of the sink's namespace from its current
// snapshot's summary (its totals): no manifest is read.
func (s *Sink) Tables(ctx context.Context) ([]sink.TableInfo, error) {
	ok, err := s.cat.CheckNamespaceExists(ctx, table.Identifier{s.opts.Namespace})
	if err != nil {
		return nil, fmt.Errorf("look up Iceberg namespace %s: %w", s.opts.Namespace, err)
	}
	if !ok {
		return nil, nil
	}
	var names []string
	for id, err := range s.cat.ListTables(ctx, table.Identifier{s.opts.Namespace}) {
		if err != nil {
			return nil, fmt.Errorf("list the tables of Iceberg namespace %s: %w", s.opts.Namespace, err)
		}
		names = append(names, id[len(id)-1])
	}
	slices.Sort(names)
	out := make([]sink.TableInfo, 0, len(names))
	for _, n := range names {
		t, err := s.load(ctx, n)
		if err != nil {
			return nil, err
		}
		if t == nil {
			continue // dropped meanwhile
		}
		out = append(out, Describe(t))
	}
	return out, nil
}

// Describe is what table t holds now. Rows are the data files' rows: a
// table with delete files (the latest table between compactions) holds
// fewer live ones.
func Describe(t *table.Table) sink.TableInfo {
	id := t.Identifier()
	info := sink.TableInfo{Table: id[len(id)-1], MetadataLocation: t.MetadataLocation(), Snapshots: len(t.Metadata().Snapshots()),
		Partitioning: partitioning(t)}
	if ids := recentBatches(t.Properties()); len(ids) > 0 {
		info.LastBatch = ids[len(ids)-1]
	}
	sn := t.CurrentSnapshot()
	if sn == nil {
		return info
	}
	info.SnapshotID = sn.SnapshotID
	info.SnapshotAt = time.UnixMilli(sn.TimestampMs).UTC()
	if sn.Summary != nil {
		p := sn.Summary.Properties
		num := func(k string) int64 { n, _ := strconv.ParseInt(p[k], 10, 64); return n }
		info.DataFiles, info.DeleteFiles = num("total-data-files"), num("total-delete-files")
		info.Rows, info.Bytes = num("total-records"), num("total-files-size")
	}
	return info
}

// partitioning names t's partition spec: none, or its fields' transforms.
func partitioning(t *table.Table) string {
	spec := t.Spec()
	var parts []string
	for _, f := range spec.Fields() {
		parts = append(parts, f.Transform.String()+"("+f.Name+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
