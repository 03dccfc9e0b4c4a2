package bigquery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/syncd-dev/syncd/internal/sink"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

var (
	_ sink.Inventory     = (*Sink)(nil)
	_ sink.VersionReader = (*Sink)(nil)
)

// batchColumn is the column every row carries its batch id in.
const batchColumn = tablepkg.ColBatchID

// HeldBatches lists the ids of the batches whose rows table holds: one
// query of its _batch_id column (sink.Inventory).
func (s *Sink) HeldBatches(ctx context.Context, table string) ([]string, error) {
	held, err := s.DescribeBatches(ctx, table)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(held))
	for i, h := range held {
		ids[i] = h.ID
	}
	return ids, nil
}

// DescribeBatches counts table's rows per batch (sink.Inventory). Every
// batch found is complete: a load job appends its rows all at once or not
// at all. The rows record neither the window, the attempt nor the schema
// of their batch, so those stay unset.
func (s *Sink) DescribeBatches(ctx context.Context, table string) ([]sink.Held, error) {
	name := s.tableName(sink.Batch{Table: table})
	cols, err := s.columns(ctx, name)
	if err != nil || cols == nil {
		return nil, err
	}
	if !cols[batchColumn] {
		return nil, fmt.Errorf("bigquery sink: table %s has no %s column, so its batches cannot be told apart: was it written by syncd?", s.fullName(name), batchColumn)
	}
	var out []sink.Held
	q := "SELECT " + batchColumn + ", COUNT(*) AS n FROM " + s.quoted(name) + " GROUP BY " + batchColumn
	err = s.query(ctx, name, q, func(row []bigquery.Value) error {
		id, _ := row[0].(string)
		n, _ := row[1].(int64)
		out = append(out, sink.Held{ID: id, Rows: n, Complete: true})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b sink.Held) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// ReadVersions reads the batch id, key, version, time and _deleted
// columns of every row of the table: one query of those columns only
// (sink.VersionReader). A column the table lacks (_deleted in a table
// from before versions) reads as unset.
func (s *Sink) ReadVersions(ctx context.Context, t sink.TableColumns, fn func(sink.RowVersion) error) error {
	name := s.tableName(sink.Batch{Table: t.Table})
	cols, err := s.columns(ctx, name)
	if err != nil || cols == nil {
		return err
	}
	if !cols[t.Key] || !cols[batchColumn] {
		return fmt.Errorf("bigquery sink: table %s has no %s or %s column to read versions by", s.fullName(name), t.Key, batchColumn)
	}
	pick := func(c string) string {
		if c != "" && cols[c] {
			return "`" + c + "`"
		}
		return "NULL"
	}
	q := "SELECT " + batchColumn + ", CAST(" + pick(t.Key) + " AS STRING), " + pick(t.Version) + ", " + pick(t.Time) + ", " + pick(tablepkg.ColDeleted) +
		" FROM " + s.quoted(name)
	return s.query(ctx, name, q, func(row []bigquery.Value) error {
		v := sink.RowVersion{}
		v.BatchID, _ = row[0].(string)
		v.Key, _ = row[1].(string)
		v.Version = utcTime(row[2])
		v.Time = utcTime(row[3])
		v.Deleted, _ = row[4].(bool)
		return fn(v)
	})
}

func utcTime(v bigquery.Value) time.Time {
	if t, ok := v.(time.Time); ok {
		return t.UTC()
	}
	return time.Time{}
}

func (s *Sink) quoted(table string) string { return "`" + s.fullName(table) + "`" }

// columns returns the top-level columns of table, or nil when the table
// (or its dataset) does not exist.
func (s *Sink) columns(ctx context.Context, table string) (map[string]bool, error) {
	exists, err := s.dataset(ctx, false)
	if err != nil || !exists {
		return nil, err
	}
	md, err := s.client.DatasetInProject(s.opts.Project, s.opts.Dataset).Table(table).Metadata(ctx)
	if v, _ := classify(err); err != nil && v == missing {
		return nil, nil
	}
	if err != nil {
		return nil, s.apiError("get table", table, "", err)
	}
	cols := make(map[string]bool, len(md.Schema))
	for _, f := range md.Schema {
		cols[f.Name] = true
	}
	return cols, nil
}

// query runs q in the dataset's location and calls fn with each row.
func (s *Sink) query(ctx context.Context, table, q string, fn func([]bigquery.Value) error) error {
	qr := s.client.Query(q)
	qr.Location = s.location
	qr.Labels = map[string]string{"app": "syncd"}
	it, err := qr.Read(ctx)
	if err != nil {
		return s.apiError("query", table, "", err)
	}
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return s.apiError("read query results", table, "", err)
		}
		if err := fn(row); err != nil {
			return err
		}
	}
}
