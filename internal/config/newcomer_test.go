package config

import (
	"strings"
	"testing"
	"time"
)

func TestDurationPrintsAsWritten(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{30 * 24 * time.Hour, "30d"}, {2 * time.Minute, "2m"}, {90 * time.Second, "1m30s"},
		{time.Hour, "1h"}, {90 * time.Minute, "1h30m"}, {500 * time.Millisecond, "500ms"}, {0, "0s"},
	} {
		if got := Duration(tc.d).String(); got != tc.want {
			t.Errorf("Duration(%v) prints %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestConfigMistakesSaidPlainly(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"a word for a number", "source:\n  rate_limit: fast\n", "`fast` is not a number"},
		{"a shell variable", "source:\n  api_key: \"$FORMS_API_KEY\"\n", `only ${VAR} is read from the environment; write "${FORMS_API_KEY}"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml), func(string) (string, bool) { return "k", true })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want it to say %q", err, tc.want)
			}
		})
	}
}
