// Command schedsim serves the scheduling API simulator (internal/schedsim)
// for the demo and manual testing.
//
//	schedsim --addr 127.0.0.1:8089 --seed 1 --bookings 200 --token-expiry 30m \
//	    [--legacy] [--secrets 2] [--fault-rate 0.05] [--token-fault-rate 0] \
//	    [--rate-limit 10] [--churn-rate 0.2] [--users ada,bob,carol]
//
// With --users the service has those accounts, each with --bookings
// bookings of their own; a browser picks who consents by opening
// <base>/sim/login?user=<username> before the authorize URL (without it the
// first user consents).
//
// The first line on stdout is one JSON object scripts read: the base URL,
// the authorization and token URLs, and the OAuth clients it accepts with
// their (simulated, throwaway) secrets. It serves until SIGINT or SIGTERM.
//
// Users register webhooks with POST /v2/webhooks (scope WEBHOOK_WRITE;
// GET needs WEBHOOK_READ) and receive BOOKING_CREATED, BOOKING_RESCHEDULED
// and BOOKING_CANCELLED signed with X-Cal-Signature-256, with delivery
// faults set by --webhook-drop-rate, --webhook-duplicate-rate,
// --webhook-delay-min/--webhook-delay-max (reorders deliveries) and
// --webhook-bad-signature-rate, seeded by --seed. Admin endpoints, without
// authentication (see internal/schedsim for all of them):
//
//	POST   /_admin/users/{username}/bookings   a booking now: {"uid","id","username","createdAt"}
//	GET    /_admin/webhooks                    registrations of every user (no secrets)
//	GET    /_admin/users/{username}/webhooks   one user's
//	DELETE /_admin/webhooks/{id}               forget one behind the client's back
//	GET    /_admin/webhook-faults              delivery faults
//	PUT    /_admin/webhook-faults              {"drop_rate","duplicate_rate","delay_min","delay_max","bad_signature_rate"}
//	GET    /_admin/webhook-stats               delivery counters
package main

import (
	"context"
	"encoding/json"
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

	"github.com/syncd-dev/syncd/internal/schedsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "schedsim:", err)
		os.Exit(2)
	}
}

// Banner is the JSON line printed at start.
type Banner struct {
	BaseURL      string            `json:"base_url"`
	AuthorizeURL string            `json:"authorize_url"`
	TokenURL     string            `json:"token_url"`
	APIVersion   string            `json:"api_version"`
	Clients      []schedsim.Client `json:"clients"`
	LoginURL     string            `json:"login_url"` // add ?user=<username>
	Users        []schedsim.User   `json:"users"`
	WebhooksURL  string            `json:"webhooks_url"` // POST/GET, DELETE /{id}
	AdminURL     string            `json:"admin_url"`    // the admin endpoints' prefix
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg     schedsim.Config
		addr    string
		legacy  bool
		secrets int
		users   string
	)
	fs := flag.NewFlagSet("schedsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", "127.0.0.1:8089", "listen address (port 0 picks a free one)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the data and of the client secrets")
	fs.IntVar(&cfg.Bookings, "bookings", 50, "initial bookings")
	fs.DurationVar(&cfg.TokenExpiry, "token-expiry", 30*time.Minute, "access token lifetime (expires_in)")
	fs.BoolVar(&legacy, "legacy", false, "the main client is a legacy client (tokens without scopes)")
	fs.IntVar(&secrets, "secrets", 2, "active secrets of the main client (1 or 2)")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0, "share of /v2/ calls answered 500/502/503")
	fs.Float64Var(&cfg.TokenFaultRate, "token-fault-rate", 0, "share of token endpoint calls answered 500/502/503")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "requests per second per access token before 429 (0: unlimited)")
	fs.Float64Var(&cfg.ChurnRate, "churn-rate", 0, "probability that a GET /v2/bookings first changes a booking")
	fs.StringVar(&users, "users", "", "comma-separated usernames of the accounts (default one account, ada)")
	fs.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", 5*time.Second, "timeout of one webhook delivery")
	cfg.WebhookFaults.AddFlags(fs, false, true)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if secrets != 1 && secrets != 2 {
		return errors.New("--secrets must be 1 or 2 (a client has at most 2 active secrets)")
	}
	if cfg.Bookings < 0 || cfg.TokenExpiry <= 0 || cfg.FaultRate < 0 || cfg.FaultRate > 1 || cfg.ChurnRate < 0 || cfg.ChurnRate > 1 {
		return errors.New("--bookings, --token-expiry, --fault-rate and --churn-rate must be in range")
	}
	if err := cfg.WebhookFaults.Validate(); err != nil {
		return fmt.Errorf("--webhook-*: %w", err)
	}
	if users != "" {
		zones := []string{"Europe/London", "America/New_York", "Asia/Tokyo", "Europe/Berlin"}
		seen := map[string]bool{}
		for i, name := range strings.Split(users, ",") {
			name = strings.TrimSpace(name)
			if name == "" || seen[name] {
				return fmt.Errorf("--users %q: usernames must be distinct and not empty", users)
			}
			seen[name] = true
			cfg.Users = append(cfg.Users, schedsim.User{Username: name, Email: name + "@example.com",
				Name: strings.ToUpper(name[:1]) + name[1:], TimeZone: zones[i%len(zones)]})
		}
	}
	clients := schedsim.DefaultClients(cfg.Seed)
	clients[0].Secrets = clients[0].Secrets[:secrets]
	clients[0].Legacy = legacy
	cfg.Clients = clients
	sim := schedsim.New(cfg)
	defer sim.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	line, _ := json.Marshal(Banner{
		BaseURL: base, AuthorizeURL: base + schedsim.PathAuthorize, TokenURL: base + schedsim.PathToken,
		APIVersion: schedsim.APIVersion, Clients: sim.Clients(),
		LoginURL: base + schedsim.PathLogin, Users: sim.Users(),
		WebhooksURL: base + schedsim.PathWebhooks, AdminURL: base + schedsim.PathAdmin,
	})
	fmt.Fprintln(stdout, string(line))
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sim.Close() // ends pending deliveries and their delays
		return srv.Shutdown(sctx)
	}
}
