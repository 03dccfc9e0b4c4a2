package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

func newTablesCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "tables",
		Short:   "List the tables of the Iceberg output: current snapshot, files, rows",
		Long:    help("tables.long"),
		Example: help("tables.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			list, err := app.OutputTables(cmd.Context(), cfg, g.accounts, log)
			if errors.Is(err, app.ErrNoTables) {
				return withCode(exitUsage, err)
			}
			if err != nil {
				return withCode(exitFailed, err)
			}
			if list == nil {
				list = []app.AccountTable{}
			}
			return g.emit(format, list, func(w io.Writer) error { return writeTables(w, list) })
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func writeTables(w io.Writer, list []app.AccountTable) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no tables yet: the first batch creates them")
		return err
	}
	rows := make([][]string, 0, len(list))
	for _, t := range list {
		at := "-"
		if !t.SnapshotAt.IsZero() {
			at = t.SnapshotAt.Format(time.RFC3339)
		}
		rows = append(rows, []string{t.Account, t.Table, strconv.FormatInt(t.SnapshotID, 10), at, strconv.FormatInt(t.DataFiles, 10),
			strconv.FormatInt(t.DeleteFiles, 10), strconv.FormatInt(t.Rows, 10), strconv.FormatInt(t.Bytes, 10), t.Partitioning, textfmt.OrDash(t.LastBatch)})
	}
	return textfmt.Table(w, []string{"ACCOUNT", "TABLE", "SNAPSHOT", "AT", "DATA FILES", "DELETE FILES", "ROWS", "BYTES", "PARTITIONING", "LAST BATCH"}, rows)
}
