// Package parquetrows reads the first rows of a table of the local Parquet
// output, and counts the rows its files hold, for `syncd rows`: only the
// output's files, no API and no state, so that it may run beside a
// running syncd.
package parquetrows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ColumnError is a column asked for that the table does not have.
type ColumnError struct {
	Column  string
	Columns []string // the table's columns
}

func (e *ColumnError) Error() string {
	return fmt.Sprintf("the table has no column %q; its columns: %s", e.Column, strings.Join(e.Columns, ", "))
}

// Table is the first rows of a table and what its files hold: what
// `syncd rows -o json` prints.
type Table struct {
	Table     string           `json:"table"`
	Path      string           `json:"path"`
	Files     int              `json:"files"`
	TotalRows int64            `json:"total_rows"`
	Columns   []string         `json:"columns"`
	Rows      []map[string]any `json:"rows"`
}

// tableFiles lists a table's committed Parquet files, sorted by path:
// hidden names (temporary files of a commit in flight, folders a purge
// moved aside) are skipped, as the sink's own listing skips them.
func tableFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && (strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_")) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".parquet") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Read reads the first n rows of the table in dir (only the columns
// named, when any) and counts the rows of all its files from their footers.
func Read(ctx context.Context, dir string, n int, only []string) (Table, error) {
	res := Table{Path: dir, Columns: []string{}, Rows: []map[string]any{}}
	paths, err := tableFiles(dir)
	if err != nil {
		return res, fmt.Errorf("list %s: %w", dir, err)
	}
	res.Files = len(paths)
	seen := map[string]bool{}
	for _, p := range paths {
		pf, err := file.OpenParquetFile(p, false)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", p, err)
		}
		res.TotalRows += pf.NumRows()
		root := pf.MetaData().Schema.Root()
		for i := range root.NumFields() {
			if name := root.Field(i).Name(); !seen[name] {
				seen[name] = true
				res.Columns = append(res.Columns, name)
			}
		}
		if len(res.Rows) < n {
			if err := appendRows(ctx, pf, n, &res.Rows); err != nil {
				pf.Close()
				return res, fmt.Errorf("read %s: %w", p, err)
			}
		}
		pf.Close()
	}
	if len(only) > 0 {
		for _, c := range only {
			if !seen[c] {
				return res, &ColumnError{Column: c, Columns: res.Columns}
			}
		}
		res.Columns = only
		for _, r := range res.Rows {
			for k := range r {
				if !slices.Contains(only, k) {
					delete(r, k)
				}
			}
		}
	}
	// Every row names every column: null where its file has no such
	// column (the table's columns follow the form as it changes).
	for _, r := range res.Rows {
		for _, c := range res.Columns {
			if _, ok := r[c]; !ok {
				r[c] = nil
			}
		}
	}
	return res, nil
}

// appendRows appends rows of pf to rows until there are n.
func appendRows(ctx context.Context, pf *file.Reader, n int, rows *[]map[string]any) error {
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(max(n, 1))}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for len(*rows) < n && rr.Next() {
		rec := rr.RecordBatch()
		for i := 0; i < int(rec.NumRows()) && len(*rows) < n; i++ {
			row := make(map[string]any, rec.NumCols())
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = value(rec.Column(c), i)
			}
			*rows = append(*rows, row)
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// value is a cell as JSON shows it: times as RFC 3339 UTC, dates as
// YYYY-MM-DD, nil for null.
func value(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano)
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Date64:
		return a.Value(i).ToTime().Format(time.DateOnly)
	}
	return arr.GetOneForMarshal(i)
}
