package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestKeysCoversTheStruct(t *testing.T) {
	keys := strings.Join(Keys(), " ")
	for _, want := range []string{"source.api_key", "forms[].id", "forms[].start_date", "sync.shutdown_grace", "sink.parquet.path", "sink.bigquery.max_backoff", "state.lease_ttl", "server.unready_after", "sync.webhooks.public_url", "sync.webhooks.secret"} {
		if !strings.Contains(" "+keys+" ", " "+want+" ") {
			t.Errorf("Keys() lacks %s: %s", want, keys)
		}
	}
	// The old top-level webhook key is refused; sync.webhooks is the new one.
	if strings.Contains(keys, "lines") || strings.Contains(" "+keys, " webhook") {
		t.Errorf("Keys() lists a key the file does not take: %s", keys)
	}
}

// TestEffectiveEveryKeyNoSecret: the effective configuration has every key
// and shows the key only as ***.
func TestEffectiveEveryKeyNoSecret(t *testing.T) {
	const secret = "sk_live_effective_9f8e7d"
	env := map[string]string{"FORMS_API_KEY": secret, "OUT": "/data/out"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse("t.yaml", []byte("forms:\n  - id: abc\nsink:\n  parquet:\n    path: ${OUT}\n"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(cfg.Effective())
	if err != nil {
		t.Fatal(err)
	}
	m, err := cfg.EffectiveMap()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(m)
	for name, text := range map[string]string{"yaml": string(raw), "json": string(js)} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the API key:\n%s", name, text)
		}
		if !strings.Contains(text, "***") || !strings.Contains(text, "/data/out") {
			t.Errorf("%s lacks the redacted key or the expanded path:\n%s", name, text)
		}
	}
	for _, key := range Keys() {
		if strings.HasPrefix(key, "accounts") {
			continue // a file of one account has no accounts list: TestEffectiveAccounts
		}
		var v any = m
		for _, part := range strings.Split(key, ".") {
			part, list := strings.CutSuffix(part, "[]")
			mm, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%s: %v is not a section", key, v)
			}
			if v, ok = mm[part]; !ok {
				t.Errorf("the effective configuration lacks %s", key)
				break
			}
			if list {
				v = v.([]any)[0]
			}
		}
	}
}

// TestEffectiveAccounts: an accounts list is shown with every account's
// key as ***.
func TestEffectiveAccounts(t *testing.T) {
	const secret = "sk_live_acme_0a1b2c"
	lookup := func(k string) (string, bool) { return secret, k == "ACME_KEY" }
	cfg, err := Parse("t.yaml", []byte("accounts:\n  - name: acme\n    api_key: ${ACME_KEY}\n    tags: [clients]\n"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(cfg.Effective())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) || !strings.Contains(string(raw), "api_key: '***'") {
		t.Errorf("the effective accounts show the key, or lack it redacted:\n%s", raw)
	}
}

// TestEffectiveShowsBigQueryDefaults: `syncd config` shows the BigQuery
// sink's retry settings as the README's key table gives them (5, 1s, 30s)
// when the file leaves them out, and the configuration carries them to the
// sink.
func TestEffectiveShowsBigQueryDefaults(t *testing.T) {
	const base = "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: d\n"
	for _, tc := range []struct {
		name, raw    string
		attempts     int
		minBo, maxBo time.Duration
	}{
		{"left out", base, 5, time.Second, 30 * time.Second},
		{"zero means the default", base + "    max_attempts: 0\n    min_backoff: 0s\n    max_backoff: 0s\n", 5, time.Second, 30 * time.Second},
		{"set", base + "    max_attempts: 3\n    min_backoff: 5ms\n    max_backoff: 1s\n", 3, 5 * time.Millisecond, time.Second},
		// The sink never pauses less than min_backoff: a longer
		// min_backoff raises the default max_backoff with it.
		{"min_backoff above the default max_backoff", base + "    min_backoff: 1m\n", 5, time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(tc.raw), env(map[string]string{"FORMS_API_KEY": "k"}))
			if err != nil {
				t.Fatal(err)
			}
			for name, bq := range map[string]*BigQuerySink{"parsed": cfg.Sink.BigQuery, "effective": cfg.Effective().Sink.BigQuery} {
				if bq.MaxAttempts != tc.attempts || bq.MinBackoff.D() != tc.minBo || bq.MaxBackoff.D() != tc.maxBo {
					t.Errorf("%s sink.bigquery: max_attempts %d, min_backoff %v, max_backoff %v; want %d, %v, %v",
						name, bq.MaxAttempts, bq.MinBackoff.D(), bq.MaxBackoff.D(), tc.attempts, tc.minBo, tc.maxBo)
				}
			}
			// As `syncd config -o json` prints it.
			m, err := cfg.EffectiveMap()
			if err != nil {
				t.Fatal(err)
			}
			bq := m["sink"].(map[string]any)["bigquery"].(map[string]any)
			if bq["max_attempts"] != tc.attempts || bq["min_backoff"] != Duration(tc.minBo).String() || bq["max_backoff"] != Duration(tc.maxBo).String() {
				t.Errorf("syncd config shows sink.bigquery %v; want max_attempts %d, min_backoff %v, max_backoff %v", bq, tc.attempts, tc.minBo, tc.maxBo)
			}
		})
	}
}

// TestEffectiveShowsFormDefaults: a listed form's table, start date and
// schedule are shown as syncd uses them (README: forms[].table defaults to
// form_ + the folded id, start_date to sync.start_date, schedule to
// sync.schedule), in the top-level list and in an account's, without
// changing the configuration itself.
func TestEffectiveShowsFormDefaults(t *testing.T) {
	const formsRaw = "sync:\n  start_date: 2024-01-31\n  schedule: '@hourly'\n"
	for _, tc := range []struct {
		name, raw string
		forms     func(*Config) []FormConfig
	}{
		{"top-level forms", formsRaw + "forms:\n  - id: 8fKq2m\n  - {id: abc, table: signups, start_date: 2025-02-01, schedule: '@daily'}\n",
			func(c *Config) []FormConfig { return c.Forms }},
		{"an account's forms", formsRaw + "accounts:\n  - name: a\n    api_key: k\n    forms:\n      - id: 8fKq2m\n      - {id: abc, table: signups, start_date: 2025-02-01, schedule: '@daily'}\n",
			func(c *Config) []FormConfig { return c.Accounts[0].Forms }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(tc.raw), env(map[string]string{"FORMS_API_KEY": "k"}))
			if err != nil {
				t.Fatal(err)
			}
			eff := cfg.Effective()
			got := tc.forms(&eff)
			want := []FormConfig{
				{ID: "8fKq2m", Table: "form_n_8fkq2m", StartDate: cfg.Sync.StartDate, Schedule: "@hourly"},
				{ID: "abc", Table: "signups", StartDate: Date{time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)}, Schedule: "@daily"},
			}
			if len(got) != len(want) {
				t.Fatalf("effective forms %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i].ID != want[i].ID || got[i].Table != want[i].Table || !got[i].StartDate.Equal(want[i].StartDate.Time) || got[i].Schedule != want[i].Schedule {
					t.Errorf("effective form %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			// The defaults stay defaults in the configuration syncd runs
			// (an empty schedule follows sync.schedule on reload).
			if f := tc.forms(cfg)[0]; f.Table != "" || !f.StartDate.IsZero() || f.Schedule != "" {
				t.Errorf("Effective changed the configuration's form: %+v", f)
			}
		})
	}
}
