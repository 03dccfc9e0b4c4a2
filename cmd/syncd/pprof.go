package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/cobra"
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
				bound, err := startPprof(cmd.Context(), addr, anyHost)
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

// checkPprofAddr refuses an address that is not loopback, unless anyHost.
func checkPprofAddr(addr string, anyHost bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof %q: %v: give HOST:PORT, e.g. 127.0.0.1:6060", addr, err)
	}
	if anyHost {
		return nil
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	if !loopback {
		return fmt.Errorf("--pprof %s would serve profiles beyond this host (they show memory, code paths and the arguments of every goroutine): use 127.0.0.1:PORT and reach it with kubectl port-forward or ssh -L, or add --pprof-any-host", addr)
	}
	return nil
}

// startPprof listens on addr and serves the profiles until ctx ends; it
// returns the address bound (ADDR with port 0 picks one).
func startPprof(ctx context.Context, addr string, anyHost bool) (string, error) {
	if err := checkPprofAddr(addr, anyHost); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--pprof %s: %w: pick a free port", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the profiles are a convenience: syncd goes on without them
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return ln.Addr().String(), nil
}
