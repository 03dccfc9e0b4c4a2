package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// BookingTriggers are the events syncd subscribes to: each changes a
// booking, and each only rings for a pass of the bookings.
var BookingTriggers = []string{"BOOKING_CREATED", "BOOKING_RESCHEDULED", "BOOKING_CANCELLED"}

// Webhook is one of the user's webhooks (GET /v2/webhooks). Cal.com's ids
// are strings (UUIDs) although its output type says number: both are read.
type Webhook struct {
	ID            string   `json:"-"`
	SubscriberURL string   `json:"subscriberUrl"`
	Triggers      []string `json:"triggers"`
	Active        bool     `json:"active"`
}

// webhookID reads an id given as a string or a number.
type webhookID string

func (w *webhookID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if nerr := json.Unmarshal(b, &n); nerr != nil {
			return fmt.Errorf("id %.40s is neither a string nor a number", b)
		}
		s = n.String()
	}
	if s == "" || strings.ContainsAny(s, "/?#") {
		return fmt.Errorf("id %.40q is not a webhook id", s)
	}
	*w = webhookID(s)
	return nil
}

// ListWebhooks lists the user's webhooks; it needs WEBHOOK_READ.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	err := c.get(ctx, "/v2/webhooks", RouteListWebhooks, ScopeWebhookRead, nil, func(b []byte) error {
		var env envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return err
		}
		var list []struct {
			Webhook
			ID webhookID `json:"id"`
		}
		if err := json.Unmarshal(env.Data, &list); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		out = make([]Webhook, 0, len(list))
		for _, w := range list {
			w.Webhook.ID = string(w.ID)
			out = append(out, w.Webhook)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateWebhook subscribes url to the booking events, deliveries signed
// with secret; it needs WEBHOOK_WRITE. The url and the secret are never put
// in errors or logs.
func (c *Client) CreateWebhook(ctx context.Context, subscriberURL, secret string) (string, error) {
	body, err := json.Marshal(struct {
		SubscriberURL string   `json:"subscriberUrl"`
		Triggers      []string `json:"triggers"`
		Active        bool     `json:"active"`
		Secret        string   `json:"secret"`
	}{subscriberURL, BookingTriggers, true, secret})
	if err != nil {
		return "", fmt.Errorf("create the bookings webhook: encode the request: %w", err)
	}
	var id string
	err = c.call(ctx, &httpapi.Request{Method: http.MethodPost, Path: "/v2/webhooks", Route: RouteCreateWebhook, Body: body, Mutating: true},
		ScopeWebhookWrite, func(b []byte) error {
			var env struct {
				Data struct {
					ID webhookID `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				return err
			}
			if env.Data.ID == "" {
				return errors.New("data has no webhook id")
			}
			id = string(env.Data.ID)
			return nil
		}, secret, subscriberURL)
	if err != nil {
		return "", err
	}
	return id, nil
}

// DeleteWebhook removes one of the user's webhooks; it needs WEBHOOK_WRITE.
// A webhook that is gone already is not an error.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return fmt.Errorf("delete webhook: %q is not a webhook id", id)
	}
	err := c.call(ctx, &httpapi.Request{Method: http.MethodDelete, Path: "/v2/webhooks/" + url.PathEscape(id), Route: RouteDeleteWebhook, Mutating: true},
		ScopeWebhookWrite, func([]byte) error { return nil })
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil
	}
	return err
}
