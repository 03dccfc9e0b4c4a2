package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBannerAndServe(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--secrets", "1", "--legacy", "--bookings", "3", "--webhook-bad-signature-rate", "0.3"}, pw, io.Discard)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var b Banner
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("banner %q: %v", line, err)
	}
	if !strings.HasPrefix(b.BaseURL, "http://127.0.0.1:") || b.TokenURL != b.BaseURL+"/v2/auth/oauth2/token" ||
		len(b.Clients) != 3 || len(b.Clients[0].Secrets) != 1 || !b.Clients[0].Legacy {
		t.Fatalf("banner = %+v", b)
	}
	if b.WebhooksURL != b.BaseURL+"/v2/webhooks" || b.AdminURL != b.BaseURL+"/_admin/" {
		t.Errorf("banner webhooks %q admin %q", b.WebhooksURL, b.AdminURL)
	}
	resp, err := http.Get(b.BaseURL + "/_admin/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("stats = %d", resp.StatusCode)
	}
	resp, err = http.Get(b.AdminURL + "webhook-faults")
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if f["bad_signature_rate"] != 0.3 {
		t.Errorf("faults %v: --webhook-bad-signature-rate did not reach the simulator", f)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
	for _, args := range [][]string{{"--secrets", "3"}, {"--webhook-bad-signature-rate", "-0.1"}, {"--webhook-duplicate-rate", "2"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestUsers(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--users", "ada, bob", "--bookings", "2"}, pw, io.Discard)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var b Banner
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("banner %q: %v", line, err)
	}
	if len(b.Users) != 2 || b.Users[0].Username != "ada" || b.Users[1].Username != "bob" || b.Users[1].Email != "bob@example.com" ||
		b.LoginURL != b.BaseURL+"/sim/login" {
		t.Fatalf("banner = %+v", b)
	}
	for user, want := range map[string]int{"bob": 200, "carol": 404} {
		resp, err := http.Get(b.LoginURL + "?user=" + user)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("login as %s: %d, want %d", user, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
	for _, users := range []string{"a,,b", "a,a", ","} {
		if err := run(context.Background(), []string{"--users", users}, io.Discard, io.Discard); err == nil {
			t.Errorf("--users %q accepted", users)
		}
	}
}
