package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/syncd-dev/syncd/internal/httpapi"
)

// BookingTriggers are the events syncd subscribes to: each changes a
// booking, and each only rings for a pass of the bookings.
var BookingTriggers = []string{"BOOKING_CREATED", "BOOKING_RESCHEDULED", "BOOKING_CANCELLED"}

// Webhook is one of the user's webhooks (GET /v2/webhooks).
type Webhook struct {
	ID            int64    `json:"id"`
	SubscriberURL string   `json:"subscriberUrl"`
	Triggers      []string `json:"triggers"`
	Active        bool     `json:"active"`
}

// webhookID reads an id given as a number or a numeric string.
type webhookID int64

func (w *webhookID) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		var s string
		if serr := json.Unmarshal(b, &s); serr != nil {
			return fmt.Errorf("id %.40s is not a number", b)
		}
		n = json.Number(s)
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("id %.40s is not a webhook id", b)
	}
	*w = webhookID(v)
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
			w.Webhook.ID = int64(w.ID)
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
func (c *Client) CreateWebhook(ctx context.Context, subscriberURL, secret string) (int64, error) {
	body, err := json.Marshal(struct {
		SubscriberURL string   `json:"subscriberUrl"`
		Triggers      []string `json:"triggers"`
		Active        bool     `json:"active"`
		Secret        string   `json:"secret"`
	}{subscriberURL, BookingTriggers, true, secret})
	if err != nil {
		return 0, fmt.Errorf("create the bookings webhook: encode the request: %w", err)
	}
	var id int64
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
			if env.Data.ID == 0 {
				return errors.New("data has no webhook id")
			}
			id = int64(env.Data.ID)
			return nil
		})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// DeleteWebhook removes one of the user's webhooks; it needs WEBHOOK_WRITE.
// A webhook that is gone already is not an error.
func (c *Client) DeleteWebhook(ctx context.Context, id int64) error {
	if id <= 0 {
		return fmt.Errorf("delete webhook: %d is not a webhook id", id)
	}
	err := c.call(ctx, &httpapi.Request{Method: http.MethodDelete, Path: "/v2/webhooks/" + strconv.FormatInt(id, 10), Route: RouteDeleteWebhook, Mutating: true},
		ScopeWebhookWrite, func([]byte) error { return nil })
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil
	}
	return err
}
