package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncd-dev/syncd/internal/profiling"
)

// pprofCommands are the commands that take --pprof: the ones that work long
// enough to be profiled in place.
var pprofCommands = map[string]bool{"run": true, "once": true, "backfill": true}

// addPprofFlags gives run, once and backfill --pprof ADDR (off by default):
// net/http/pprof's handlers under /debug/pprof/ on a listener and mux of
// their own, never on the metrics server. ADDR must be a loopback address
// unless --pprof-any-host is given too: profiles show the process's
// memory and code paths, and the goroutine dump shows URLs and arguments.
func addPprofFlags(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		if !pprofCommands[c.Name()] {
			continue
		}
		var addr string
		var anyHost bool
		c.Flags().StringVar(&addr, "pprof", "", "serve Go profiles (net/http/pprof) at http://ADDR/debug/pprof/, e.g. 127.0.0.1:6060; off by default")
		c.Flags().BoolVar(&anyHost, "pprof-any-host", false, "let --pprof listen on an address other than loopback")
		prev := c.PreRunE
		c.PreRunE = func(cmd *cobra.Command, args []string) error {
			if addr != "" {
				bound, err := profiling.Serve(cmd.Context(), addr, anyHost)
				if err != nil {
					return withCode(exitUsage, err)
				}
				fmt.Fprintf(g.stderr, "syncd: profiles at http://%s/debug/pprof/\n", bound)
			}
			if prev != nil {
				return prev(cmd, args)
			}
			return nil
		}
	}
}
