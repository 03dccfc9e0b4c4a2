// Package profiling serves Go's profiles (net/http/pprof) on a listener
// and mux of their own, never on the metrics server: profiles show the
// process's memory and code paths, and the goroutine dump shows URLs and
// arguments, so only loopback is served unless asked otherwise.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// CheckAddr refuses an address that is not loopback, unless anyHost:
// the error names the flags of the commands that serve them, --pprof and
// --pprof-any-host.
func CheckAddr(addr string, anyHost bool) error {
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

// Serve listens on addr and serves the profiles until ctx ends; it
// returns the address bound (ADDR with port 0 picks one).
func Serve(ctx context.Context, addr string, anyHost bool) (string, error) {
	if err := CheckAddr(addr, anyHost); err != nil {
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
