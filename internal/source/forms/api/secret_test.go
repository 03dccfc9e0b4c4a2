package forms

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// leaks reports whether s contains the test key or a recognisable part of it.
func leaks(s string) bool {
	return strings.Contains(s, testKey) || strings.Contains(s, "SECRET_123")
}

// Every failure path, with a server that echoes the Authorization header in
// its bodies, must keep the key out of errors and logs.
func TestAPIKeyNeverInErrorsOrLogs(t *testing.T) {
	answers := []struct {
		name string
		step step
	}{
		{"400 echo", echoAuth(400)},
		{"401 echo", echoAuth(401)},
		{"404 echo", echoAuth(404)},
		{"422 echo", echoAuth(422)},
		{"500 echo", echoAuth(500)},
		{"503 echo", echoAuth(503)},
		{"501 echo", echoAuth(501)},
		{"200 malformed echo", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"responses": [%q`, r.Header.Get("Authorization"))
		}},
		{"200 text echo", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "auth was %s", r.Header.Get("Authorization"))
		}},
		{"timeout", hang},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			s := newStub(t, a.step)
			core, logs := observer.New(zapcore.DebugLevel)
			cfg := testConfig(s.base())
			cfg.MaxAttempts = 2
			cfg.Timeout = 25 * time.Millisecond
			cfg.Logger = zap.New(core)
			var obs attemptLog
			cfg.Observer = &obs
			c := newClient(t, cfg)
			ctx := context.Background()
			calls := []func() error{
				func() error { _, err := c.ListForms(ctx); return err },
				func() error { _, err := c.GetForm(ctx, "f1"); return err },
				func() error { _, err := c.ListSubmissions(ctx, "f1", ListParams{Limit: 1}); return err },
				func() error { _, err := c.GetSubmission(ctx, "f1", "s1", true); return err },
				func() error { _, err := c.CreateSubmissions(ctx, "f1", []NewSubmission{{}}); return err },
				func() error { return c.DeleteSubmission(ctx, "f1", "s1") },
				func() error { _, err := c.CreateWebhook(ctx, "f1", "https://h.example.com/x"); return err },
				func() error { return c.DeleteWebhook(ctx, 5) },
			}
			errs := 0
			for i, call := range calls {
				err := call()
				if err == nil {
					continue
				}
				errs++
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					if leaks(text) {
						t.Errorf("call %d: error leaks the key: %s", i, text)
					}
				}
			}
			if errs == 0 {
				t.Fatal("no call failed: the test exercised nothing")
			}
			if logs.Len() == 0 {
				t.Fatal("no debug log lines")
			}
			for _, e := range logs.All() {
				line := e.Message + fmt.Sprint(e.ContextMap())
				if leaks(line) {
					t.Errorf("log line leaks the key: %s", line)
				}
			}
			for _, o := range obs.all() {
				if o.Err != nil && leaks(o.Err.Error()) {
					t.Errorf("observer error leaks the key: %v", o.Err)
				}
			}
		})
	}
}

func TestServerMessageRedactedAndShortened(t *testing.T) {
	c := newClient(t, testConfig("https://x.example.com"))
	tests := []struct {
		body, want string
	}{
		{`{"message":"Bearer ` + testKey + ` is not valid"}`, "Bearer [REDACTED] is not valid"},
		{`{"error":"bad\nthing\t here"}`, "bad thing here"},
		{`{"error":{"code":7}}`, `{"code":7}`},
		{"plain text " + testKey, "plain text [REDACTED]"},
		{``, ""},
	}
	for _, tt := range tests {
		if got := c.serverMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("serverMessage(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
	long := c.serverMessage([]byte(strings.Repeat("é", 1000)))
	if n := len([]rune(long)); n != 301 {
		t.Errorf("long message is %d runes, want 300 and an ellipsis", n)
	}
}

// Printing a Config or Client, with any verb, or logging a Config with
// zap.Any, must not show the key.
func TestConfigAndClientNeverPrintTheKey(t *testing.T) {
	cfg := testConfig("https://x.example.com/v1/api")
	c := newClient(t, cfg)
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("starting", zap.Any("cfg", cfg), zap.Any("client", c))
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		fmt.Sprintf("%v %+v %#v %s %d %q", cfg, cfg, cfg, cfg, cfg, cfg),
		fmt.Sprintf("%v %+v %#v %s %d %q", &cfg, &cfg, &cfg, &cfg, &cfg, &cfg),
		fmt.Sprintf("%v %+v %#v %s %d %q", c, c, c, c, c, c),
		fmt.Sprint(logs.All()[0].ContextMap()),
		string(js),
	}
	for _, text := range texts {
		if leaks(text) {
			t.Errorf("key printed: %s", text)
		}
	}
	mustContain(t, texts[0], "https://x.example.com/v1/api", "[REDACTED]")
}

func TestDebugLogLinePerAttempt(t *testing.T) {
	s := newStub(t, status(503, ""), ok(minimalPage))
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig(s.base())
	cfg.Logger = zap.New(core)
	c := newClient(t, cfg)
	if _, err := c.ListSubmissions(context.Background(), "f1", ListParams{}); err != nil {
		t.Fatal(err)
	}
	entries := logs.FilterLevelExact(zapcore.DebugLevel).All()
	if len(entries) != 2 {
		t.Fatalf("%d debug lines, want one per attempt (2)", len(entries))
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).Len(); n != 1 {
		t.Errorf("%d info lines, want one for the first retry", n)
	}
	for i, e := range entries {
		m := e.ContextMap()
		if e.Level != zapcore.DebugLevel || m["endpoint"] != RouteListSubmissions || m["path"] != "/forms/f1/submissions" ||
			m["attempt"] != int64(i+1) || m["duration"] == nil {
			t.Errorf("line %d = %s %v", i, e.Message, m)
		}
	}
	if m := entries[0].ContextMap(); m["status"] != int64(503) || m["retry_in"] == nil || m["error"] == nil {
		t.Errorf("first line = %v", m)
	}
	if m := entries[1].ContextMap(); m["status"] != int64(200) || m["error"] != nil {
		t.Errorf("second line = %v", m)
	}
}
