package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestErrorsNameKeyAndLine: decoding and validation errors alike name the
// key and its line.
func TestErrorsNameKeyAndLine(t *testing.T) {
	env := func(k string) (string, bool) { return "k", k == "FORMS_API_KEY" }
	tests := []struct {
		name, yaml string
		line       int
		key        string
		msg        string
	}{
		{"bad duration", "sync:\n  safety_lag: 2m\n  jitter: soon\n", 3, "sync.jitter", `"soon" is not a duration`},
		{"validation of a value", "source:\n  rate_limit: 0\n", 2, "source.rate_limit", "must be a positive number"},
		{"validation in a list", "forms:\n  - id: a\n  - id: a\n", 3, "forms[1].id", "listed twice"},
		{"validation of a section", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n", 3, "sink.bigquery", "needs project and dataset"},
		{"page size", "sync:\n\n  page_size: 500\n", 3, "sync.page_size", "between 1 and 150"},
		{"webhook removed", "source:\n  rate_limit: 5\nwebhook:\n  addr: :8080\n", 3, "webhook", "remove the webhook section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml), env)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *config.Error", err)
			}
			text := err.Error()
			if ce.Line != tt.line && !strings.Contains(text, "line "+strconv.Itoa(tt.line)+":") {
				t.Errorf("%q: want line %d", text, tt.line)
			}
			if !strings.Contains(text, tt.key+":") || !strings.Contains(text, tt.msg) {
				t.Errorf("%q: want key %s and %q", text, tt.key, tt.msg)
			}
		})
	}
}
