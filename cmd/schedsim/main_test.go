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
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--secrets", "1", "--legacy", "--bookings", "3"}, pw, io.Discard)
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
	resp, err := http.Get(b.BaseURL + "/_admin/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("stats = %d", resp.StatusCode)
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
	if err := run(context.Background(), []string{"--secrets", "3"}, io.Discard, io.Discard); err == nil {
		t.Error("--secrets 3 accepted")
	}
}
