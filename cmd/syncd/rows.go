package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/parquetrows"
	"github.com/syncd-dev/syncd/internal/poller"
)

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
			res, err := parquetrows.Read(cmd.Context(), filepath.Join(root, table), n, columns)
			if err != nil {
				return rowsError(err)
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

// rowsError gives an error of parquetrows.Read its exit code: 2 for a
// column the table lacks, 1 otherwise.
func rowsError(err error) error {
	var col *parquetrows.ColumnError
	if errors.As(err, &col) {
		return withCode(exitUsage, fmt.Errorf("--columns: %w", err))
	}
	return withCode(exitFailed, err)
}

// printRows writes the rows as a table, then how many the table holds.
func printRows(w io.Writer, res parquetrows.Table) error {
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
