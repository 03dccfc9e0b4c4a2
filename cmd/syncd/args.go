package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/suggest"
)

// formArgs lets a command whose form is --form take it as an argument too:
// `syncd backfill F` is `syncd backfill --form F`. max is how many forms
// it takes (-1: any, --form being repeatable). An argument and a --form
// that name different forms of a one-form command are refused.
func formArgs(max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if max >= 0 && len(args) > max {
			return withCode(exitUsage, fmt.Errorf("too many arguments (%s): %s takes one form, as an argument or as --form", strings.Join(args, " "), cmd.CommandPath()))
		}
		f := cmd.Flags().Lookup("form")
		for _, a := range args {
			if max == 1 && f.Changed && f.Value.String() != a {
				return withCode(exitUsage, fmt.Errorf("two forms given, %s and --form %s: %s works on one form; give it once", a, f.Value.String(), cmd.CommandPath()))
			}
			if max == 1 && f.Changed {
				continue
			}
			if err := cmd.Flags().Set("form", a); err != nil {
				return withCode(exitUsage, err)
			}
		}
		return nil
	}
}

// formOrFlag is the form of a command that takes it as an argument, FORM,
// or as --form (flag): one of them, or both naming the same form. required
// makes a missing form exit 2.
func formOrFlag(cmd *cobra.Command, args []string, flag string, required bool) (string, error) {
	switch {
	case len(args) > 1:
		return "", withCode(exitUsage, fmt.Errorf("too many arguments (%s): give one form", strings.Join(args, " ")))
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", withCode(exitUsage, fmt.Errorf("two forms given, %s and --form %s: give one", args[0], flag))
	case len(args) == 1:
		return args[0], nil
	case flag != "":
		return flag, nil
	case required:
		return "", withCode(exitUsage, fmt.Errorf("FORM is missing: give a form id, as an argument or as --form (`%s`)", cmd.UseLine()))
	}
	return "", nil
}

// suggestCommands makes every command that has subcommands refuse an
// unknown one (exit 2, naming the closest: `syncd onec` is "did you mean
// once?"), where cobra would print the help and exit 0 (or name none), and
// every unknown flag name the closest flag (`--dryrun`: --dry-run).
func suggestCommands(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			run := c.RunE
			c.Args = cobra.ArbitraryArgs
			if c.Example == "" {
				c.Example = "  " + c.CommandPath() + " --help"
			}
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return unknownCommand(cmd, args[0])
				}
				if run != nil {
					return run(cmd, args)
				}
				return cmd.Help()
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func unknownCommand(cmd *cobra.Command, typed string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return withCode(exitUsage, errors.New(suggest.UnknownCommand(typed, cmd.CommandPath(), names)))
}

// flagError names the closest flag of an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return withCode(exitUsage, err)
	}
	var names []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return withCode(exitUsage, errors.New(suggest.UnknownFlag(msg, name, cmd.CommandPath(), names)))
}

// streamKey is the state's key of a form id given with one --account: the
// id within that account's namespace.
func (g *globals) streamKey(formID string) string {
	return app.AccountStreamKey(g.accounts, formID)
}
