package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=..."; when
// it is not, buildinfo.Version reads the module version and VCS stamp Go
// records in every binary.
var version = ""

// revision may be set with -ldflags "-X main.revision=<git commit>" where Go
// cannot read the VCS itself (a Docker build without .git).
var revision = ""

func init() {
	info, ok := debug.ReadBuildInfo()
	version = buildinfo.Version(version, revision, info, ok)
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	var format string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: help("version.example"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if asJSON || format == formatJSON {
				return json.NewEncoder(g.stdout).Encode(map[string]string{"version": version})
			}
			fmt.Fprintln(g.stdout, "syncd "+version)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (same as -o json)")
	addOutputFlag(cmd, &format)
	return cmd
}
