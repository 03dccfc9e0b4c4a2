// Command formsim serves the Forms API simulator on loopback, for the demo,
// manual testing and benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "formsim:", err)
		os.Exit(2)
	}
}

func run() error {
	var cfg formsim.Config
	var faults formsim.Faults
	addr := flag.String("addr", "127.0.0.1:8088", "listen address (port 0 picks a free one)")
	flag.StringVar(&cfg.APIKey, "api-key", os.Getenv("FORMSIM_API_KEY"), "the API key clients must send (env FORMSIM_API_KEY)")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed of the generated data")
	flag.IntVar(&cfg.Forms, "forms", 3, "number of forms; the first holds every documented question type")
	flag.IntVar(&cfg.Submissions, "submissions", 1000, "finished submissions per form")
	flag.BoolVar(&cfg.InclusiveDates, "inclusive", false, "treat afterDate/beforeDate as inclusive")
	flag.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests per second before 429 (0: unlimited)")
	end := flag.String("end", "", "submission times end here (RFC 3339; default now)")
	flag.DurationVar(&faults.Latency, "latency", 0, "latency added to every request")
	flag.Float64Var(&faults.ErrorRate, "error-rate", 0, "share of requests answered 500/502/503")
	flag.Parse()
	if *end != "" {
		t, err := time.Parse(time.RFC3339, *end)
		if err != nil {
			return fmt.Errorf("--end %q: %w", *end, err)
		}
		cfg.End = t
	}
	srv, err := formsim.New(cfg)
	if err != nil {
		return err
	}
	srv.SetFaults(faults)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("http://%s%s\n", ln.Addr(), formsim.BasePath)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
