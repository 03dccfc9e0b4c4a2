package config

import (
	"encoding/json"
	"strings"
	"testing"

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
