package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
)

func newWebhooksCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "webhooks",
		Short:   "The webhooks syncd registered: per form, and per scheduling user",
		Long:    help("webhooks.long"),
		Example: help("webhooks.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := g.readAccountsView(cmd.Context(), format, "?webhooks=1")
			if err != nil {
				return err
			}
			rows := app.KeepWebhooks(v.Webhooks, g.accounts)
			return g.emit(format, rows, func(w io.Writer) error { return app.WriteWebhooks(w, rows) })
		},
	}
	addOutputFlag(cmd, &format)
	cmd.AddCommand(newWebhooksRemoveCmd(g))
	return cmd
}

func newWebhooksRemoveCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "remove",
		Short:   "Delete every webhook syncd registered, at the services and in the state",
		Long:    help("webhooks-remove.long"),
		Example: help("webhooks-remove.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			a, err := g.openApp(ctx, false)
			if err != nil {
				return err
			}
			defer a.Close()
			rows, failed := a.RemoveWebhooks(ctx)
			if format == formatJSON {
				if err := printJSON(g.stdout, rows); err != nil {
					return err
				}
			} else if err := app.WriteRemovedWebhooks(g.stdout, rows); err != nil {
				return err
			}
			if failed != nil {
				return withCode(exitFailed, errReported)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}
