package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
)

func newAccountsCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "accounts",
		Short: "Each account's forms, sign-in, last pass, lag and last error",
		Long: "One line per configured account, read from the state (beside a running `syncd run`,\n" +
			"through its /status): the form streams synced, whether its bookings are, its scheduling\n" +
			"sign-in (who, and the access token's expiry; `syncd auth status` asks the token endpoint),\n" +
			"rows, the last successful pass, the lag of its least recent stream, and the last error.\n" +
			"Exit 1 when an account has a failing stream or a sign-in missing.",
		Example: "  syncd accounts\n  syncd accounts -o json | jq '.[] | select(.failing_streams > 0)'",
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
		Use:   "link NAME...",
		Short: "Print the connect link of each account: its user opens it to sign in to the scheduling API",
		Long: "The link is server.public_url/connect?account=NAME&token=T, where T is signed with\n" +
			"server.connect_secret for that account alone: hand it to the account's user, who consents\n" +
			"at the scheduling API and is sent back to `syncd run`, which stores the sign-in. Changing\n" +
			"connect_secret invalidates every link.",
		Example: "  syncd accounts link acme\n  syncd accounts link acme globex -o json",
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
