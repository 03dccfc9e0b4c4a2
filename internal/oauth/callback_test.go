package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/schedsim"
)

// browserAnswer is the page the loopback listener gave the browser.
type browserAnswer struct {
	status int
	body   string
	err    error
}

// TestReceiverAnswersWithTheOutcome: the browser that brings the code is
// answered only with the outcome of the sign-in, and only once it is
// known: success after Finish(nil), the failed step otherwise, "stopped"
// when syncd closes the listener first, "still finishing" past the wait.
// A reload shows the same outcome. No page shows the code or a message of
// the error.
func TestReceiverAnswersWithTheOutcome(t *testing.T) {
	s := newSim(t, schedsim.Config{Seed: 11})
	tests := []struct {
		name       string
		finish     func(r *Receiver) // after the code was received
		wait       time.Duration     // answerWait; default the package's
		wantStatus int
		wantPage   string
		reload     bool // a second visit shows the outcome too
	}{
		{name: "signed in", finish: func(r *Receiver) { r.Finish(nil) }, wantStatus: 200, wantPage: "syncd is signed in", reload: true},
		{name: "save failed", finish: func(r *Receiver) {
			r.Finish(StepFailed(StepSave, errors.New("write /var/lib/syncd/state.db: no space left on device")))
		}, wantStatus: 500, wantPage: "not signed in: it could not save the sign-in", reload: true},
		{name: "exchange refused", finish: func(r *Receiver) {
			r.Finish(StepFailed(StepExchange, &TokenEndpointError{Op: "exchange", Status: 400, Code: "invalid_grant", Description: "<b>expired</b>"}))
		}, wantStatus: 502, wantPage: "(the token endpoint answered invalid_grant): the code expired or was already used"},
		{name: "unnamed failure", finish: func(r *Receiver) { r.Finish(errors.New("open /secret/path: denied")) },
			wantStatus: 500, wantPage: "not signed in: the sign-in could not be finished"},
		{name: "closed before the outcome", finish: func(r *Receiver) { _ = r.Close() }, wantStatus: 503, wantPage: "stopped before the sign-in was finished"},
		{name: "outcome late", wait: 50 * time.Millisecond, finish: func(*Receiver) {}, wantStatus: 202, wantPage: "still finishing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := s.config(t, "sim-client")
			rcv, err := Listen(cfg.RedirectURI)
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			if tt.wait > 0 {
				rcv.answerWait = tt.wait
			}
			cfg.RedirectURI = rcv.RedirectURI()
			c, err := NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ar, _ := c.NewAuthRequest()
			answered := make(chan browserAnswer, 1)
			go func() { answered <- visit(ar.URL) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			code, err := rcv.Wait(ctx, ar.State)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wait == 0 {
				select {
				case a := <-answered:
					t.Fatalf("the browser was answered (%d %q) before the outcome was known", a.status, a.body)
				case <-time.After(100 * time.Millisecond):
				}
			}
			tt.finish(rcv)
			var a browserAnswer
			select {
			case a = <-answered:
			case <-time.After(10 * time.Second):
				t.Fatal("the browser got no answer")
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			t.Logf("page %d %q", a.status, a.body)
			if a.status != tt.wantStatus || !strings.Contains(a.body, tt.wantPage) {
				t.Errorf("page %d %q, want %d saying %q", a.status, a.body, tt.wantStatus, tt.wantPage)
			}
			for _, leak := range []string{code, "/var/lib", "/secret", "<b>", "expired</b>"} {
				if strings.Contains(a.body, leak) {
					t.Errorf("the page shows %q, from the code or an error's message", strings.ReplaceAll(leak, code, "[CODE]"))
				}
			}
			if tt.reload {
				again := visit(rcv.RedirectURI() + "?code=other&state=" + ar.State)
				if again.status != tt.wantStatus || !strings.Contains(again.body, tt.wantPage) {
					t.Errorf("reload: page %d %q, want the outcome again", again.status, again.body)
				}
			}
		})
	}
}

// visit is a browser following u to the end.
func visit(u string) browserAnswer {
	resp, err := http.Get(u)
	if err != nil {
		return browserAnswer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return browserAnswer{status: resp.StatusCode, body: string(b)}
}
