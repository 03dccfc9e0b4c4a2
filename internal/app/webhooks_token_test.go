package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/internal/formsim"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// TestWebhookTokenNeverLogged: a form's webhook URL holds its path token,
// the webhook's only credential. When the Forms API refuses the
// registration and quotes the URL in its message, the pass's warning and the
// client's debug lines must still keep the token out, and the warning must
// keep the rest of the server's message.
func TestWebhookTokenNeverLogged(t *testing.T) {
	tests := []struct {
		name   string
		status int
	}{
		{"refused (400)", http.StatusBadRequest},
		{"failing (500)", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The simulator, except that webhook registrations fail quoting
			// the url sent, as some services do.
			quoting := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !strings.HasSuffix(r.URL.Path, "/webhook/create") {
						next.ServeHTTP(w, r)
						return
					}
					var body struct {
						URL string `json:"url"`
					}
					b, _ := io.ReadAll(r.Body)
					_ = json.Unmarshal(b, &body)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tt.status)
					fmt.Fprintf(w, `{"message":"url %s is not reachable"}`, body.URL)
				})
			}
			sim := testkit.StartSimWrapped(t, formsim.Config{Seed: 9, Forms: 1, Submissions: 2}, quoting)
			const secret = "0123456789abcdef-secret"
			cfg := accountsConfig(t, t.TempDir(), sim.BaseURL, "  webhooks: {public_url: \"https://syncd.example.com\", secret: \""+secret+"\"}\n", `  - {name: acme, api_key: "${KEY}"}
`)
			core, logs := observer.New(zapcore.DebugLevel)
			ctx := context.Background()
			a, err := Open(ctx, cfg, zap.New(core), Options{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			entries := a.Account("acme").DaemonEntries()
			defer func() {
				for _, e := range entries {
					e.Close()
				}
			}()
			entries[0].Pass(ctx)

			token := formsource.WebhookToken([]byte(secret), "acme", sim.FormIDs()[0])
			warned := false
			for _, e := range logs.All() {
				line := e.Message
				for k, v := range e.ContextMap() {
					line += fmt.Sprintf(" %s=%v", k, v)
				}
				warning := e.Level == zapcore.WarnLevel && strings.Contains(e.Message, "registering the form's webhook failed")
				warned = warned || warning
				switch {
				case strings.Contains(line, token):
					// Neither the token nor the line is printed: secrets never
					// reach test output.
					t.Errorf("the form's path token is in a %s log line %q", e.Level, e.Message)
				case warning && !strings.Contains(line, "url <webhook url> is not reachable"):
					t.Errorf("the warning lost the server's message: %s", line)
				}
			}
			if !warned {
				t.Error("no warning about the failed registration: the test exercised nothing")
			}
		})
	}
}
