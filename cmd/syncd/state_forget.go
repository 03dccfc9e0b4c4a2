package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/state"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// newStateForgetCmd is `syncd state forget STREAM`: the record of a stream
// the configuration no longer names (a form removed from forms[], an id
// mistyped there and since fixed) removed from the state, so that it no
// longer shows in `state show` and `accounts`. Its output is kept.
func newStateForgetCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "forget STREAM",
		Short:   "Remove the record of a stream the configuration no longer names (its output is kept)",
		Long:    help("state-forget.long"),
		Example: help("state-forget.example"),
		Args:    exactArgs(1, "STREAM", "the stream to forget, as `syncd state show` names it"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, err := g.openApp(ctx, false)
			if err != nil {
				return err
			}
			defer a.Close()
			list, err := a.Store.List(ctx)
			if err != nil {
				return withCode(exitFailed, err)
			}
			key := args[0]
			if len(g.accounts) == 1 && !slices.ContainsFunc(list, func(st state.StreamState) bool { return st.Key == key }) {
				if acct, err := g.account(a.Cfg); err == nil {
					key = tablepkg.StreamKey(acct.Namespace(), key)
				}
			}
			st, err := findState(list, key)
			if err != nil {
				return err
			}
			if err := app.ForgetRefused(app.StreamConfigured(a.Cfg), st); err != nil {
				return withCode(exitUsage, err)
			}
			kept := app.ForgetKept(st)
			if !yes {
				if err := confirm(g, fmt.Sprintf("Remove the record of stream %s from the state (%s)?", key, kept), key); err != nil {
					return err
				}
			}
			if err := a.Store.Reset(ctx, key); err != nil {
				return withCode(exitFailed, err)
			}
			app.WriteForgotten(g.stdout, key, kept)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// exactArgs is cobra.ExactArgs with an error that names the argument.
func exactArgs(n int, name, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		if len(args) < n {
			return withCode(exitUsage, fmt.Errorf("%s is missing: give %s (`%s`)", name, what, cmd.UseLine()))
		}
		return withCode(exitUsage, errors.New("too many arguments: "+strings.Join(args[n:], " ")+" (`"+cmd.UseLine()+"`)"))
	}
}
