package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

func newConfigCmd(g *globals) *cobra.Command {
	format := "yaml"
	cmd := &cobra.Command{
		Use:     "config",
		Short:   "Print the effective configuration: every key, after defaults and ${ENV}, secrets as ***",
		Example: help("config.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format, "yaml", formatJSON); err != nil {
				return err
			}
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			if format == formatJSON {
				m, err := cfg.EffectiveMap()
				if err != nil {
					return withCode(exitFailed, err)
				}
				return printJSON(g.stdout, m)
			}
			raw, err := yaml.Marshal(cfg.Effective())
			if err != nil {
				return withCode(exitFailed, fmt.Errorf("print the configuration: %w", err))
			}
			_, err = g.stdout.Write(raw)
			return err
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", format, "output format: yaml or json")
	return cmd
}
