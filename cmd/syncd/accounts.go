package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
)

func newAccountsCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "accounts",
		Short:   "Each account's forms, sign-in, last pass, lag and last error",
		Long:    help("accounts.long"),
		Example: help("accounts.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := g.readAccountsView(cmd.Context(), format, "?accounts=1")
			if err != nil {
				return err
			}
			list := app.KeepAccounts(v.Accounts, g.accounts)
			if err := g.emit(format, list, func(w io.Writer) error { return app.WriteAccounts(w, list) }); err != nil {
				return err
			}
			for _, a := range list {
				if a.Failing > 0 || a.SignIn != nil && !a.SignIn.SignedIn {
					return withCode(exitFailed, errReported)
				}
			}
			return nil
		},
	}
	addOutputFlag(cmd, &format)
	cmd.AddCommand(newAccountsLinkCmd(g))
	return cmd
}

// newAccountsLinkCmd prints an account's connect link: the page where its
// user signs in to the scheduling API by themselves.
func newAccountsLinkCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "link NAME...",
		Short:   "Print the connect link of each account: its user opens it to sign in to the scheduling API",
		Long:    help("accounts-link.long"),
		Example: help("accounts-link.example"),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			links, err := app.ConnectLinks(cfg, args)
			if err != nil {
				return withCode(exitUsage, err)
			}
			return g.emit(format, links, func(w io.Writer) error { return app.WriteConnectLinks(w, links) })
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}
