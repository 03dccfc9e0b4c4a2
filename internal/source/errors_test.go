package source_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/internal/source"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
)

// TestSourcesErrorsAreTypedByTheContract: what the app decides on (a key
// refused, a form gone, a service that kept failing) is read in the
// contract's kinds from either source's own errors, wrapped as a pass
// wraps them, and the message stays the source's own.
func TestSourcesErrorsAreTypedByTheContract(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		kind     source.Kind
		sentinel error
	}{
		{"forms key refused", &forms.AuthError{BaseURL: "https://f.test", Status: 401}, source.Auth, source.ErrAuth},
		{"forms form gone", &forms.NotFoundError{What: "form", ID: "vLp2aX", BaseURL: "https://f.test"}, source.NotFound, source.ErrNotFound},
		{"forms 429s", &forms.UnavailableError{Endpoint: "GET /forms", Status: 429, Attempts: 8}, source.RateLimited, source.ErrRateLimited},
		{"forms 503s", &forms.UnavailableError{Endpoint: "GET /forms", Status: 503, Attempts: 8}, source.Unavailable, source.ErrUnavailable},
		{"scheduling token refused", &scheduling.APIError{Endpoint: "GET /v2/bookings", Status: 401}, source.Auth, source.ErrAuth},
		{"scheduling 404", &scheduling.APIError{Endpoint: "GET /v2/bookings", Status: 404}, source.NotFound, source.ErrNotFound},
		{"scheduling 429s", &scheduling.APIError{Endpoint: "GET /v2/bookings", Status: 429}, source.RateLimited, source.ErrRateLimited},
		{"scheduling no answer", &scheduling.APIError{Endpoint: "GET /v2/bookings"}, source.Unavailable, source.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fmt.Errorf("sync stream: %w", tt.err)
			se := source.AsError(err)
			if se == nil || se.Kind != tt.kind {
				t.Fatalf("AsError(%v) = %+v, want kind %s", err, se, tt.kind)
			}
			if !source.Is(err, tt.kind) || !errors.Is(se, tt.sentinel) {
				t.Errorf("the kind %s is not matched by Is or by its sentinel", tt.kind)
			}
			if se.Error() != tt.err.Error() {
				t.Errorf("the contract's error says %q, the source's %q: the message must stay the source's", se.Error(), tt.err.Error())
			}
			if !errors.Is(se, tt.err) {
				t.Error("the contract's error does not unwrap to the source's")
			}
		})
	}
	if se := source.AsError(&scheduling.APIError{Status: 400}); se != nil {
		t.Errorf("a request refused with 400 is typed %s: no kind the contract knows", se.Kind)
	}
	if !source.IsNotFound(fmt.Errorf("x: %w", &forms.NotFoundError{What: "form", ID: "a"}), "form", "a") {
		t.Error("IsNotFound misses a form not found")
	}
	if source.IsNotFound(&forms.NotFoundError{What: "form", ID: "a"}, "form", "b") {
		t.Error("IsNotFound matches another form's id")
	}
}
