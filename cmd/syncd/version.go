package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."; when
// it is not, versionString reads the module version and VCS stamp Go
// records in every binary.
var version = ""

// revision may be set with -ldflags "-X main.revision=<git commit>" where Go
// cannot read the VCS itself (a Docker build without .git).
var revision = ""

// versionString is the version to print and stamp into output: the
// -ldflags value, else the module version (go install module@v1.2.3) and
// the VCS revision go build records (with -dirty for uncommitted changes),
// or the one stamped with -ldflags, else "dev".
func versionString(stamped, stampedRev string, info *debug.BuildInfo, ok bool) string {
	if stamped != "" {
		return stamped
	}
	if !ok || info == nil {
		info = &debug.BuildInfo{}
	}
	v := info.Main.Version
	if v == "(devel)" {
		v = ""
	}
	rev := stampedRev
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	switch {
	case v != "" && rev != "" && !isPseudo(v, rev):
		return v + " (" + rev + ")"
	case v != "":
		return v
	case rev != "":
		return "dev-" + rev
	default:
		return "dev"
	}
}

// isPseudo reports whether v is a pseudo-version that already carries rev.
func isPseudo(v, rev string) bool {
	if len(rev) < 12 {
		return false
	}
	return len(v) >= 12 && v[len(v)-12:] == rev[:12]
}

func init() {
	info, ok := debug.ReadBuildInfo()
	version = versionString(version, revision, info, ok)
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	var format string
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  syncd version\n  syncd version -o json",
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
