package forms

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// hookToken stands for a form's path token: the only credential of its
// webhook URL.
const hookToken = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"

// echoHookURL answers with code and a body made by write from the url
// registered, as a service that quotes the request in its errors. (The
// stub has read the request's body already: the test hands the url over.)
func echoHookURL(code int, write func(hookURL string) string) func(hookURL string) step {
	return func(hookURL string) step {
		return status(code, write(hookURL))
	}
}

// A webhook URL carries its receiver's secret: however the service echoes
// it back in an error, neither the URL nor its token may reach the error or
// the debug log, while the message stays readable.
func TestCreateWebhookHidesTheURLInServerMessages(t *testing.T) {
	hooks := map[string]string{
		"path token":  "https://hooks.example.com/webhook/forms/acme/f1/" + hookToken,
		"query token": "https://hooks.example.com/in?token=" + hookToken,
	}
	tests := []struct {
		name    string
		answer  func(hookURL string) step
		wantMsg string // in the error, when set
	}{
		{"400 quoting the url", echoHookURL(400, func(u string) string {
			return fmt.Sprintf(`{"message":"url %s is not reachable"}`, u)
		}), "url <webhook url> is not reachable"},
		{"422 quoting the url escaped", echoHookURL(422, func(u string) string {
			return fmt.Sprintf(`{"error":"bad url %s"}`, url.QueryEscape(u))
		}), "bad url <webhook url>"},
		{"400 quoting the url with another host case", echoHookURL(400, func(u string) string {
			return fmt.Sprintf(`{"message":"%s refused"}`, strings.Replace(u, "hooks.example.com", "HOOKS.example.com", 1))
		}), "refused"},
		{"400 quoting only the token", echoHookURL(400, func(string) string {
			return `{"message":"token ` + hookToken + ` is malformed"}`
		}), "token [REDACTED] is malformed"},
		{"400 body without a message, JSON-escaped", echoHookURL(400, func(u string) string {
			b, _ := json.Marshal(map[string]string{"detail": strings.ReplaceAll(u, "/", `\/`)})
			return string(b)
		}), ""},
		{"500 quoting the url", echoHookURL(500, func(u string) string {
			return fmt.Sprintf(`{"message":"cannot reach %s"}`, u)
		}), "cannot reach <webhook url>"},
		{"503 quoting the url, retried", echoHookURL(503, func(u string) string {
			return fmt.Sprintf(`{"message":"busy with %s"}`, u)
		}), "busy with <webhook url>"},
	}
	for hookName, hook := range hooks {
		for _, tt := range tests {
			t.Run(hookName+"/"+tt.name, func(t *testing.T) {
				s := newStub(t, tt.answer(hook))
				core, logs := observer.New(zapcore.DebugLevel)
				cfg := testConfig(s.base())
				cfg.MaxAttempts = 2
				cfg.Logger = zap.New(core)
				c := newClient(t, cfg)
				_, err := c.CreateWebhook(context.Background(), "f1", hook)
				if err == nil {
					t.Fatal("CreateWebhook succeeded: the test exercised nothing")
				}
				if r := s.requests(); len(r) == 0 || !strings.Contains(r[0].Body, hookToken) {
					t.Fatal("the request did not carry the token: the test exercised nothing")
				}
				leaked := false
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					if strings.Contains(text, hookToken) {
						leaked = true
						t.Error("the error shows the webhook's token") // not printed: a secret
					}
				}
				if !leaked && tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not keep the server's message %q", err, tt.wantMsg)
				}
				if logs.Len() == 0 {
					t.Fatal("no debug log lines")
				}
				for _, e := range logs.All() {
					if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), hookToken) {
						t.Errorf("a %s log line shows the webhook's token", e.Level)
					}
				}
			})
		}
	}
}

func TestHookURLRedactions(t *testing.T) {
	tests := []struct {
		name, hook, msg, want string
	}{
		{"whole url", "https://h.example.com/in/" + hookToken, "url https://h.example.com/in/" + hookToken + " down", "url <webhook url> down"},
		{"path only", "https://h.example.com/in/" + hookToken, "path /in/" + hookToken + " unknown", "path [REDACTED] unknown"},
		{"short parts kept", "https://h.example.com/in/" + hookToken, "form f1 in error", "form f1 in error"},
		{"root path kept", "https://h.example.com/", "path / is not allowed", "path / is not allowed"},
		{"password", "https://u:pw@h.example.com/x", "login pw refused", "login [REDACTED] refused"},
	}
	c := newClient(t, testConfig("https://x.example.com"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.hook)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(map[string]string{"message": tt.msg})
			if got := c.serverMessage(b, hookURLRedactions(tt.hook, u)...); got != tt.want {
				t.Errorf("message = %q, want %q", got, tt.want)
			}
		})
	}
}
