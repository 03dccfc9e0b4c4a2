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

func newCompactCmd(g *globals) *cobra.Command {
	var format string
	var tables []string
	cmd := &cobra.Command{
		Use:     "compact [--table T]...",
		Short:   "Compact the Iceberg tables, expire old snapshots and remove orphan files",
		Long:    help("compact.long"),
		Example: help("compact.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			reports, err := app.Compact(cmd.Context(), cfg, g.accounts, tables, log)
			if errors.Is(err, app.ErrNoTables) || errors.Is(err, app.ErrNoSuchTable) {
				return withCode(exitUsage, err)
			}
			// What was done before a failure is printed too: those tables
			// are maintained.
			if err == nil || len(reports) > 0 {
				if reports == nil {
					reports = []app.CompactReport{}
				}
				if perr := g.emit(format, reports, func(w io.Writer) error { return writeCompact(w, reports) }); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				if cmd.Context().Err() != nil {
					// Ctrl-C: what was compacted is committed; the rest
					// waits for the next run.
					return withCode(exitInterrupted, fmt.Errorf("stopped: %w", err))
				}
				return withCode(exitFailed, err)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&tables, "table", nil, "only these tables (a stream's table; its _latest table comes with it)")
	addOutputFlag(cmd, &format)
	return cmd
}

func writeCompact(w io.Writer, reports []app.CompactReport) error {
	if len(reports) == 0 {
		_, err := fmt.Fprintln(w, "no tables yet: nothing to compact")
		return err
	}
	rows := make([][]string, 0, len(reports))
	for _, r := range reports {
		rows = append(rows, []string{r.Account, r.Table,
			strconv.Itoa(r.DataFilesBefore) + " -> " + strconv.Itoa(r.DataFilesAfter),
			strconv.Itoa(r.DeleteFilesBefore) + " -> " + strconv.Itoa(r.DeleteFilesAfter),
			strconv.FormatInt(r.BytesRewritten, 10), strconv.Itoa(r.SnapshotsExpired), strconv.Itoa(r.OrphansRemoved),
			r.Duration.Round(time.Millisecond).String()})
	}
	return textfmt.Table(w, []string{"ACCOUNT", "TABLE", "DATA FILES", "DELETE FILES", "BYTES REWRITTEN", "SNAPSHOTS EXPIRED", "ORPHANS REMOVED", "TOOK"}, rows)
}
