package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/schedsim"
)

// TestWebhooks: create, list and delete against the simulator (string ids,
// the secret never in an error), a second delete of a gone webhook is not
// an error, and a token without the webhook scopes gets a ScopeError that
// names the scope.
func TestWebhooks(t *testing.T) {
	e := newEnv(t, schedsim.Config{Seed: 3})
	ctx := context.Background()
	c, _ := e.client(t, "sim-client", "BOOKING_READ", "WEBHOOK_READ", "WEBHOOK_WRITE")
	const url, secret = "http://127.0.0.1:9/webhooks/scheduling/acme", "signing-secret-0123456789"
	id, err := c.CreateWebhook(ctx, url, secret)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListWebhooks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].SubscriberURL != url || !list[0].Active || len(list[0].Triggers) != len(BookingTriggers) {
		t.Fatalf("listed %+v, want the one created (%s)", list, id)
	}
	if _, err := c.CreateWebhook(ctx, url, secret); err == nil {
		t.Error("a second webhook at the same URL was accepted: the simulator answers 409")
	} else if strings.Contains(err.Error(), secret) {
		t.Errorf("the error shows the secret: %v", err)
	}
	if err := c.DeleteWebhook(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWebhook(ctx, id); err != nil {
		t.Errorf("deleting a webhook gone already: %v", err)
	}
	if list, _ := c.ListWebhooks(ctx); len(list) != 0 {
		t.Errorf("listed %+v after the delete", list)
	}

	ro, _ := e.client(t, "sim-client", "BOOKING_READ")
	_, err = ro.CreateWebhook(ctx, url, secret)
	var se *oauth.ScopeError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "WEBHOOK_WRITE") {
		t.Errorf("without WEBHOOK_WRITE: %v, want a ScopeError naming it", err)
	}
	if _, err := ro.ListWebhooks(ctx); !errors.As(err, &se) {
		t.Errorf("without WEBHOOK_READ: %v, want a ScopeError", err)
	}
}

// A service that echoes the webhook's secret or URL in a refusal (400, or
// 403 on the webhook endpoints, or a 5xx) must not put them in the error,
// which reaches the logs.
func TestCreateWebhookErrorHidesTheSecretAndURL(t *testing.T) {
	const url, secret = "http://127.0.0.1:9/webhooks/scheduling/acme-3f9c2a71", "signing-secret-0123456789"
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newEnv(t, schedsim.Config{Seed: 3})
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v2/webhooks" {
					body, _ := io.ReadAll(r.Body)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "error": map[string]string{"message": "refused: " + string(body)}})
					return
				}
				e.sim.ServeHTTP(w, r)
			}))
			defer front.Close()
			_, ts := e.client(t, "sim-client", "BOOKING_READ", "WEBHOOK_READ", "WEBHOOK_WRITE")
			c, err := New(Config{BaseURL: front.URL, Tokens: ts, RateLimit: 1000, Burst: 100,
				MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CreateWebhook(context.Background(), url, secret)
			if err == nil {
				t.Fatal("a refused create reported success")
			}
			if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "acme-3f9c2a71") {
				t.Errorf("the error of a refused create holds the webhook's secret (%t) or URL (%t)", strings.Contains(msg, secret), strings.Contains(msg, "acme-3f9c2a71"))
			}
			var se *oauth.ScopeError
			if !errors.As(err, &se) && !strings.Contains(err.Error(), "refused") { // a 403 says which scope instead
				t.Errorf("the error lost the service's message: %v", err)
			}
		})
	}
}
