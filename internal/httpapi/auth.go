package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Authorizer sets the credentials of one attempt. It is called before every
// attempt, so a token source can hand out a fresh access token on a retry.
// An error stops the call without sending it.
type Authorizer interface {
	Authorize(ctx context.Context, req *http.Request) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, req *http.Request) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, req *http.Request) error { return f(ctx, req) }

// StaticHeader sets one header to a fixed value: the Forms API key as
// "Authorization: Bearer <key>". Its value never prints.
type StaticHeader struct {
	Name  string
	Value string
}

// Authorize sets the header.
func (s StaticHeader) Authorize(_ context.Context, req *http.Request) error {
	req.Header.Set(s.Name, s.Value)
	return nil
}

// String keeps the value out of anything that prints a StaticHeader.
func (s StaticHeader) String() string {
	return fmt.Sprintf("httpapi.StaticHeader{Name: %q, Value: [REDACTED]}", s.Name)
}

// Format makes every fmt verb print String.
func (s StaticHeader) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// Bearer is the Authorization header of a static bearer token.
func Bearer(token string) StaticHeader {
	return StaticHeader{Name: "Authorization", Value: "Bearer " + token}
}

// Transport is an http.RoundTripper that authorizes each request it carries,
// for code that takes a plain *http.Client (a browser-less OAuth helper, a
// third-party SDK). It clones the request before adding the header, as a
// RoundTripper must not change its input.
type Transport struct {
	Auth Authorizer
	Base http.RoundTripper // default http.DefaultTransport
}

// RoundTrip authorizes a clone of req and sends it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	clone := req.Clone(req.Context())
	if err := t.Auth.Authorize(req.Context(), clone); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(clone)
}
