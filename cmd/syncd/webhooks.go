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
		Use:   "webhooks",
		Short: "The webhooks syncd registered: per form, and per scheduling user",
		Long: "The webhooks `syncd run` registered with sync.webhooks.public_url set, from the state:\n" +
			"account, source (forms, scheduling), stream (a form id, or bookings), the service's webhook\n" +
			"id and when it was registered. Their URLs are never shown: a forms URL holds its path token.\n" +
			"Beside a running syncd run, read from its /status?webhooks=1.",
		Example: "  syncd webhooks\n  syncd webhooks -o json | jq length\n  syncd webhooks remove",
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
		Use:   "remove",
		Short: "Delete every webhook syncd registered, at the services and in the state",
		Long: "Delete the webhooks `syncd run` registered (of every account, or --account), at the Forms\n" +
			"API and the scheduling API, and forget them in the state; prints those removed. Stop\n" +
			"syncd run first, or remove sync.webhooks.public_url from its configuration: a running\n" +
			"syncd with it set registers them again at its next pass. Polling is not affected.",
		Example: "  syncd webhooks remove\n  syncd webhooks remove --account acme -o json",
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
