package config

import (
	"strings"
	"testing"
	"time"
)

func TestPassesPerDay(t *testing.T) {
	from := time.Date(2024, 5, 1, 13, 7, 0, 0, time.UTC) // a Wednesday
	cases := []struct {
		spec string
		want int
	}{
		{"*/15 * * * *", 96},
		{"* * * * *", 1440},
		{"@hourly", 24},
		{"@daily", 1},
		{"@every 30s", 2880},
		{"@every 1m", 1440},
		{"*/5 9-17 * * 1-5", 108}, // the busiest day of the week
		{"0 0 1 1 *", 0},          // not within the week
	}
	for _, tc := range cases {
		got, err := PassesPerDay(tc.spec, from)
		if err != nil || got != tc.want {
			t.Errorf("PassesPerDay(%q) = %d, %v; want %d", tc.spec, got, err, tc.want)
		}
	}
	if _, err := PassesPerDay("every minute", from); err == nil {
		t.Error("a bad schedule gave no error")
	}
}

func TestQuotaWarnings(t *testing.T) {
	now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	bq := func(schedule string, forms ...FormConfig) *Config {
		c := Defaults()
		c.Sink.Type = "bigquery"
		c.Sink.BigQuery = &BigQuerySink{Project: "p", Dataset: "d"}
		c.Sync.Schedule = schedule
		c.Forms = forms
		return &c
	}
	parquet := Defaults()
	parquet.Sync.Schedule = "@every 10s"
	cases := []struct {
		name string
		cfg  *Config
		want []string // one part per warning expected, in order
	}{
		{"default schedule", bq("*/15 * * * *"), nil},
		{"every minute fits", bq("* * * * *"), nil},
		{"every 30 seconds", bq("@every 30s"), []string{`sync.schedule "@every 30s" starts 2880 passes`}},
		{"a form's own schedule", bq("@hourly", FormConfig{ID: "a"}, FormConfig{ID: "b", Schedule: "@every 20s"}),
			[]string{`forms[1].schedule (form b) "@every 20s" starts 4320 passes`}},
		{"parquet has no quota", &parquet, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.QuotaWarnings(now)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "1500 load jobs a day") {
					t.Errorf("warning %q does not say %q and the quota", got[i], w)
				}
			}
		})
	}
}

func TestBigQueryKeys(t *testing.T) {
	withKey := env(map[string]string{"FORMS_API_KEY": "k"})
	base := "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: d\n"
	cases := []struct {
		name string
		raw  string
		want string // a fragment of the error; "" for none
	}{
		{"test endpoint", base + "    endpoint: http://127.0.0.1:9050/bigquery/v2/\n    max_attempts: 3\n    min_backoff: 5ms\n    max_backoff: 1s\n", ""},
		{"endpoint without scheme", base + "    endpoint: 127.0.0.1:9050\n", "sink.bigquery.endpoint"},
		{"negative attempts", base + "    max_attempts: -1\n", "cannot be negative"},
		{"no dataset", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n", "needs project and dataset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(tc.raw), withKey)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			case tc.want == "" && (cfg.Sink.BigQuery.MaxAttempts != 3 || cfg.Sink.BigQuery.MinBackoff.D() != 5*time.Millisecond):
				t.Errorf("keys not read: %+v", cfg.Sink.BigQuery)
			}
		})
	}
}
