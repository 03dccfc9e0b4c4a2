package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/poller"
)

// rowsJSON is what `syncd rows -o json` prints.
type rowsJSON struct {
	Table     string           `json:"table"`
	Path      string           `json:"path"`
	Files     int              `json:"files"`
	TotalRows int64            `json:"total_rows"`
	Columns   []string         `json:"columns"`
	Rows      []map[string]any `json:"rows"`
}

// maxCell is the most runes a value takes in the table output; -o json
// prints values whole.
const maxCell = 40

func newRowsCmd(g *globals) *cobra.Command {
	var format string
	var n int
	var columns []string
	cmd := &cobra.Command{
		Use:   "rows TABLE|FORM",
		Short: "Print the first rows of a table of the Parquet output",
		Long: "Print the first rows (-n) of a table of the local Parquet output (sink.parquet.path),\n" +
			"in the order of its partition folders, and how many rows its files hold. TABLE is a\n" +
			"table's folder name (`syncd forms` names each form's; the bookings go to bookings), or a\n" +
			"form id. It reads only the output's files: no API, no state, and it may run beside a\n" +
			"running syncd. In the table, values are cut to 40 characters; -o json prints them whole.\n" +
			"For a bucket or BigQuery, read the output with DuckDB or `bq head`.",
		Example: "  syncd rows bookings -n 5 --config configs/demo.yaml\n" +
			"  syncd rows vLp2aX --columns submission_id,submission_time\n" +
			"  syncd rows form_vlp2ax -n 3 -o json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if n < 0 {
				return withCode(exitUsage, fmt.Errorf("-n %d: give 0 or more rows", n))
			}
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			if !app.FilesOutput(cfg) {
				return withCode(exitUsage, fmt.Errorf("sink.type is %s: syncd rows reads a local Parquet output; for BigQuery, `bq head DATASET.TABLE`", cfg.Sink.Type))
			}
			acct, err := g.account(cfg)
			if err != nil {
				return err
			}
			root := app.OutputOf(cfg, acct.Namespace())
			if blobstore.IsURL(root) {
				return withCode(exitUsage, fmt.Errorf("the output is in a bucket (%s): syncd rows reads a local folder; read the bucket with DuckDB", root))
			}
			tables := []string{args[0]}
			for _, f := range append(slices.Clone(acct.Forms), cfg.Forms...) {
				if f.ID == args[0] && f.Table != "" {
					tables = append(tables, f.Table)
				}
			}
			tables = append(tables, poller.DefaultTable(args[0]))
			table := ""
			for _, t := range tables {
				if t == "" || strings.ContainsAny(t, `/\`) || strings.HasPrefix(t, ".") {
					continue
				}
				if st, err := os.Stat(filepath.Join(root, t)); err == nil && st.IsDir() {
					table = t
					break
				}
			}
			if table == "" {
				return withCode(exitUsage, noTable(root, args[0]))
			}
			res, err := readRows(cmd.Context(), filepath.Join(root, table), n, columns)
			if err != nil {
				return err
			}
			res.Table = table
			if format == formatJSON {
				return printJSON(g.stdout, res)
			}
			return printRows(g.stdout, res)
		},
	}
	cmd.Flags().IntVarP(&n, "rows", "n", 10, "how many rows to print")
	cmd.Flags().StringSliceVar(&columns, "columns", nil, "print only these columns, in this order (comma-separated)")
	addOutputFlag(cmd, &format)
	return cmd
}

// noTable says that name is no table of the output, and names those it has.
func noTable(root, name string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no output at %s yet: run `syncd once` first", root)
		}
		return fmt.Errorf("read the output %s: %w", root, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s has no table yet: run `syncd once` first", root)
	}
	return fmt.Errorf("%s is neither a table under %s nor a form id of one; its tables: %s", name, root, strings.Join(names, ", "))
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

// readRows reads the first n rows of the table in dir (only the columns
// named, when any) and counts the rows of all its files from their footers.
func readRows(ctx context.Context, dir string, n int, only []string) (rowsJSON, error) {
	res := rowsJSON{Path: dir, Columns: []string{}, Rows: []map[string]any{}}
	paths, err := tableFiles(dir)
	if err != nil {
		return res, withCode(exitFailed, fmt.Errorf("list %s: %w", dir, err))
	}
	res.Files = len(paths)
	seen := map[string]bool{}
	for _, p := range paths {
		pf, err := file.OpenParquetFile(p, false)
		if err != nil {
			return res, withCode(exitFailed, fmt.Errorf("read %s: %w", p, err))
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
				return res, withCode(exitFailed, fmt.Errorf("read %s: %w", p, err))
			}
		}
		pf.Close()
	}
	if len(only) > 0 {
		for _, c := range only {
			if !seen[c] {
				return res, withCode(exitUsage, fmt.Errorf("--columns: the table has no column %q; its columns: %s", c, strings.Join(res.Columns, ", ")))
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

// printRows writes the rows as a table, then how many the table holds.
func printRows(w io.Writer, res rowsJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	upper := make([]string, len(res.Columns))
	for i, c := range res.Columns {
		upper[i] = strings.ToUpper(c)
	}
	fmt.Fprintln(tw, strings.Join(upper, "\t"))
	for _, r := range res.Rows {
		cells := make([]string, len(res.Columns))
		for i, c := range res.Columns {
			cells[i] = cellText(r[c])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return withCode(exitFailed, err)
	}
	_, err := fmt.Fprintf(w, "%d of %s of %s (%s under %s)\n", len(res.Rows), plural(res.TotalRows, "row"), res.Table, plural(int64(res.Files), "file"), res.Path)
	return err
}

// cellText is a value on one line of the table: no control characters
// (a tab or newline would break the columns, an escape the terminal), at
// most maxCell runes.
func cellText(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		s = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(b)
		}
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}
