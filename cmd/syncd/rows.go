package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/parquetrows"
)

func newRowsCmd(g *globals) *cobra.Command {
	var format string
	var n int
	var columns []string
	cmd := &cobra.Command{
		Use:     "rows TABLE|FORM",
		Short:   "Print the first rows of a table of the Parquet output",
		Long:    help("rows.long"),
		Example: help("rows.example"),
		Args:    cobra.ExactArgs(1),
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
			root, table, err := app.OutputTable(cfg, acct, args[0])
			if err != nil {
				return withCode(exitUsage, err)
			}
			res, err := parquetrows.Read(cmd.Context(), filepath.Join(root, table), n, columns)
			if err != nil {
				return rowsError(err)
			}
			res.Table = table
			if format == formatJSON {
				return printJSON(g.stdout, res)
			}
			// Two calls keep the exit codes printRows had: a table that
			// could not be written is exit 1, the count line's error as is.
			if err := res.WriteText(g.stdout); err != nil {
				return withCode(exitFailed, err)
			}
			_, err = fmt.Fprintln(g.stdout, res.CountText())
			return err
		},
	}
	cmd.Flags().IntVarP(&n, "rows", "n", 10, "how many rows to print")
	cmd.Flags().StringSliceVar(&columns, "columns", nil, "print only these columns, in this order (comma-separated)")
	addOutputFlag(cmd, &format)
	return cmd
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
