// Command formsim serves the Forms API simulator (internal/formsim) for the
// demo, manual testing and benchmarks.
//
//	formsim --addr 127.0.0.1:8088 --api-key KEY --seed 1 --forms 3 --submissions 10000 \
//	    [--inclusive] [--rate-limit 5] [--latency 200ms] [--error-rate 0.05] [...fault flags]
//
// The key may also come from FORMSIM_API_KEY. The first line on stdout is
// the base URL (http://127.0.0.1:8088/v1/api; with port 0 the real port);
// the server runs until SIGINT or SIGTERM and then shuts down gracefully.
//
// With --accounts N it serves N accounts (workspaces) behind one URL, as
// the service serves many customers: account i (1..N) has the API key
// <key-prefix><i> and seed --seed + i - 1, so every account has its own
// forms and data; --rate-limit and the fault flags apply to each account
// on its own. After the base URL, stdout has one line per account:
// "account <i> key <key> seed <seed> forms <id> <id> ...". The keys are
// simulator keys, so printing them is harmless.
//
//	formsim --addr 127.0.0.1:8088 --accounts 3 --key-prefix sk_sim_ --rate-limit 5
//
// Webhooks registered with POST /webhook/create receive each new submission
// (created through the API, arrivals, or the admin endpoint below), with
// delivery faults set by --webhook-drop-rate, --webhook-duplicate-rate,
// --webhook-delay-min/--webhook-delay-max (reorders deliveries) and
// --webhook-bare-rate (the bare submission instead of the envelope), per
// account, seeded by --seed. Admin endpoints, without authentication, on
// the server root (with --accounts, under /_admin/accounts/<key>/ instead
// of /_admin/; PUT /_admin/webhook-faults sets every account's):
//
//	GET    /_admin/webhooks                    registrations: id, formId, url (the url may carry the receiver's secret)
//	DELETE /_admin/webhooks/{id}               forget one behind the client's back
//	GET    /_admin/webhook-faults              delivery faults
//	PUT    /_admin/webhook-faults              {"drop_rate","duplicate_rate","delay_min","delay_max","bare_rate"}
//	GET    /_admin/stats                       counters; deliveries under "Webhooks"
//	POST   /_admin/forms/{formId}/submissions  one submission now: {"formId","submissionId","submissionTime"}
//	POST   /_admin/forms/{formId}/submissions/{submissionId}/edit  edit one now (lastUpdatedAt moves): 204
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "formsim:", err)
		os.Exit(2)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	var (
		cfg    formsim.Config
		faults formsim.Faults
		addr   string
		start  string
		end    string
		n      int
		prefix string
	)
	fs := flag.NewFlagSet("formsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", "127.0.0.1:8088", "listen address (port 0 picks a free one)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "the API key clients must send (default $FORMSIM_API_KEY)")
	fs.IntVar(&n, "accounts", 0, "serve this many accounts, keys <key-prefix>1..N (0: one account, --api-key)")
	fs.StringVar(&prefix, "key-prefix", "sk_sim_", "with --accounts, the API keys' prefix")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the generated data")
	fs.IntVar(&cfg.Forms, "forms", 3, "number of forms; the first asks every documented question type")
	fs.IntVar(&cfg.Submissions, "submissions", 1000, "finished submissions per form")
	fs.StringVar(&start, "start", "", "submission times start here (RFC 3339; default end - 30 days)")
	fs.StringVar(&end, "end", "", "submission times end here (RFC 3339; default now, truncated to the minute)")
	fs.BoolVar(&cfg.InclusiveDates, "inclusive", false, "afterDate/beforeDate keep submissions at exactly those instants")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests per second before 429 (0: unlimited)")
	fs.IntVar(&cfg.RateBurst, "rate-burst", 0, "rate limiter burst (0: one second's worth)")
	fs.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", 5*time.Second, "timeout of one webhook delivery")
	cfg.WebhookFaults.AddFlags(fs, true, false)

	fs.DurationVar(&faults.Latency, "latency", 0, "latency added to every request")
	fs.Float64Var(&faults.ServerErrorRate, "error-rate", 0, "share of requests answered 500/502/503")
	fs.Float64Var(&faults.RateLimitRate, "rate-limit-rate", 0, "share of requests answered 429")
	fs.IntVar(&faults.RateLimitBurstEvery, "burst-every", 0, "every Nth request starts a burst of 429s")
	fs.IntVar(&faults.RateLimitBurstLen, "burst-len", 3, "length of a burst of 429s")
	fs.DurationVar(&faults.RetryAfter, "retry-after", 0, "Retry-After on every 429 (0: none, as documented)")
	fs.Float64Var(&faults.SlowRate, "slow-rate", 0, "share of requests delayed by --slow-delay")
	fs.DurationVar(&faults.SlowDelay, "slow-delay", time.Second, "delay of a slow request")
	fs.Float64Var(&faults.TruncateRate, "truncate-rate", 0, "share of GET answers cut mid-JSON")
	fs.Float64Var(&faults.MalformedRate, "malformed-rate", 0, "share of GET answers that are not JSON")
	fs.Float64Var(&faults.BadValueRate, "bad-value-rate", 0, "share of answers that do not fit their question type")
	fs.IntVar(&faults.MetadataChurnEvery, "churn-every", 0, "every Nth metadata read of a form changes the form")
	fs.IntVar(&faults.ArrivalsPerPage, "arrivals-per-page", 0, "new submissions arriving per page served")
	fs.IntVar(&faults.BackdatedPerPage, "backdated-per-page", 0, "back-dated imports per page served")
	fs.IntVar(&faults.EditsPerPage, "edits-per-page", 0, "edits per page served")
	fs.IntVar(&faults.DeletesPerPage, "deletes-per-page", 0, "deletions per page served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := cfg.WebhookFaults.Validate(); err != nil {
		return fmt.Errorf("--webhook-*: %w", err)
	}
	switch {
	case n < 0:
		return fmt.Errorf("--accounts %d is negative", n)
	case n > 0 && cfg.APIKey != "":
		return errors.New("--api-key and --accounts exclude each other: with --accounts the keys are <key-prefix><i>")
	case n > 0 && prefix == "":
		return errors.New("--key-prefix must not be empty")
	case n == 0 && cfg.APIKey == "":
		cfg.APIKey = getenv("FORMSIM_API_KEY")
		if cfg.APIKey == "" {
			return errors.New("an API key is required: pass --api-key or set FORMSIM_API_KEY")
		}
	}
	for _, t := range []struct {
		flag string
		text string
		dst  *time.Time
	}{{"--start", start, &cfg.Start}, {"--end", end, &cfg.End}} {
		if t.text == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.text)
		if err != nil {
			return fmt.Errorf("%s %q is not an RFC 3339 time", t.flag, t.text)
		}
		*t.dst = v
	}

	var (
		handler http.Handler
		closer  io.Closer
		report  func()
	)
	if n == 0 {
		sim, err := formsim.New(cfg)
		if err != nil {
			return err
		}
		sim.SetFaults(faults)
		handler, closer = sim, sim
		report = func() {
			fmt.Fprintf(stderr, "formsim: %d forms of %d submissions (seed %d): %s\n",
				cfg.Forms, cfg.Submissions, cfg.Seed, strings.Join(sim.FormIDs(), " "))
		}
	} else {
		cfgs := make([]formsim.Config, n)
		for i := range cfgs {
			cfgs[i] = cfg
			cfgs[i].APIKey = fmt.Sprintf("%s%d", prefix, i+1)
			cfgs[i].Seed = cfg.Seed + int64(i)
		}
		multi, err := formsim.NewMulti(cfgs...)
		if err != nil {
			return err
		}
		for _, k := range multi.Keys() {
			multi.Workspace(k).SetFaults(faults)
		}
		handler, closer = multi, multi
		report = func() {
			for i, c := range cfgs {
				fmt.Fprintf(stdout, "account %d key %s seed %d forms %s\n",
					i+1, c.APIKey, c.Seed, strings.Join(multi.Workspace(c.APIKey).FormIDs(), " "))
			}
			fmt.Fprintf(stderr, "formsim: %d accounts of %d forms of %d submissions\n", n, cfg.Forms, cfg.Submissions)
		}
	}
	defer closer.Close()

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	fmt.Fprintf(stdout, "http://%s%s\n", ln.Addr(), formsim.BasePath)
	report()

	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closer.Close() // ends injected delays so in-flight requests finish quickly
	if err := hs.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
