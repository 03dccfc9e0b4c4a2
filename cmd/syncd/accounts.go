package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/status"
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
			if format == formatJSON {
				if err := printJSON(g.stdout, list); err != nil {
					return err
				}
			} else {
				rows := make([][]string, 0, len(list))
				for _, a := range list {
					rows = append(rows, []string{a.Name, strconv.Itoa(a.Forms), yesNo(a.Bookings), signInText(a.SignIn), strconv.FormatInt(a.Rows, 10),
						timeText(a.LastSuccess), lagText(a.LagSeconds), orDash(a.LastError)})
				}
				if err := tabular(g.stdout, []string{"ACCOUNT", "FORMS", "BOOKINGS", "SIGN-IN", "ROWS", "LAST SUCCESS", "LAG", "LAST ERROR"}, rows); err != nil {
					return err
				}
				for _, a := range list {
					if n := len(a.NotConfigured); n > 0 {
						fmt.Fprintf(g.stdout, "account %s: the state still holds %s the configuration no longer names, not synced and not counted above: %s (`syncd state forget ID --yes` removes a record)\n",
							a.Name, plural(int64(n), "stream"), strings.Join(a.NotConfigured, ", "))
					}
				}
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
			if format == formatJSON {
				return printJSON(g.stdout, links)
			}
			rows := make([][]string, 0, len(links))
			for _, l := range links {
				rows = append(rows, []string{l.Account, l.URL})
			}
			return tabular(g.stdout, []string{"ACCOUNT", "CONNECT LINK"}, rows)
		},
	}
	addOutputFlag(cmd, &format)
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func signInText(s *status.SignIn) string {
	switch {
	case s == nil:
		return "-"
	case s.Error != "":
		return "unreadable"
	case !s.SignedIn:
		return "not signed in"
	default:
		return orDash(s.User)
	}
}

func timeText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func lagText(s *float64) string {
	if s == nil {
		return "-"
	}
	return ageText(time.Duration(*s * float64(time.Second)))
}

// ageText is a duration as a person reads it: "42s", "3h5m", "989d 21h"
// (never "23737h21m7s").
func ageText(d time.Duration) string {
	if d < 0 {
		return "-" + ageText(-d)
	}
	switch {
	case d >= 48*time.Hour:
		days, hours := d/(24*time.Hour), (d%(24*time.Hour))/time.Hour
		return fmt.Sprintf("%dd %dh", days, hours)
	case d >= time.Hour:
		s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	default:
		return d.Round(time.Second).String()
	}
}
