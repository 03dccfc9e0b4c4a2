package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestBigQueryValuesAreConfigErrors: a BigQuery sink's values that BigQuery
// (or the load path) would refuse are configuration errors naming the key,
// its line and the fix (README: "Unknown keys and bad values are errors
// that name the key and the line"), not errors of the sink when it opens.
func TestBigQueryValuesAreConfigErrors(t *testing.T) {
	withKey := env(map[string]string{"FORMS_API_KEY": "k"})
	const base = "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: d\n"
	for _, tc := range []struct {
		name, raw string
		want      []string // every fragment must appear in the error; none: valid
	}{
		{"five clustering columns", base + "    clustering: [a, b, c, d, e]\n",
			[]string{"line 6", "sink.bigquery.clustering", "5 columns", "at most 4"}},
		{"four clustering columns", base + "    clustering: [a, b, c, d]\n", nil},
		{"a dataset id with a dash", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: my-dataset\n",
			[]string{"line 5", "sink.bigquery.dataset", `"my-dataset"`, "letters, digits and underscores", "my_dataset"}},
		{"a dataset id with a dot", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: p.forms\n",
			[]string{"line 5", "sink.bigquery.dataset", "p_forms"}},
		{"a dataset id over 1024 characters", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: " + strings.Repeat("d", 1025) + "\n",
			[]string{"line 5", "sink.bigquery.dataset", "at most 1024"}},
		{"a dataset id of 1024 characters", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: " + strings.Repeat("d", 1024) + "\n", nil},
		{"a dataset id of letters, digits and underscores", "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: Forms_2024\n", nil},
		{"a compression the loads do not take", "sink:\n  type: bigquery\n  parquet:\n    compression: lz4\n  bigquery:\n    project: p\n    dataset: d\n",
			[]string{"line 4", "sink.parquet.compression", `"lz4"`, "zstd, snappy, none", "BigQuery"}},
		{"snappy loads", "sink:\n  type: bigquery\n  parquet:\n    compression: snappy\n  bigquery:\n    project: p\n    dataset: d\n", nil},
		{"max_backoff below min_backoff", base + "    min_backoff: 10s\n    max_backoff: 5s\n",
			[]string{"line 7", "sink.bigquery.max_backoff", "max_backoff: 5s is shorter than min_backoff (10s)"}},
		{"max_backoff below the default min_backoff", base + "    max_backoff: 500ms\n",
			[]string{"line 6", "sink.bigquery.max_backoff", "min_backoff (1s)"}},
		{"min_backoff alone above the default max_backoff", base + "    min_backoff: 1m\n", nil},
		{"equal backoffs", base + "    min_backoff: 2s\n    max_backoff: 2s\n", nil},
		{"uncompressed loads", "sink:\n  type: bigquery\n  parquet:\n    compression: none\n  bigquery:\n    project: p\n    dataset: d\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.raw), withKey)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused a valid configuration: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error naming %s", strings.Join(tc.want, ", "))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// secretCases hold a configuration per secret key, with the secret set to
// ${S}, and how to read the secret back.
var secretCases = []struct {
	key, raw string
	line     int
	get      func(*Config) Secret
}{
	{"source.api_key", "source:\n  base_url: http://x/v1\n  api_key: ${S}\n", 3,
		func(c *Config) Secret { return c.Source.APIKey }},
	{"scheduling.client_secret", "scheduling:\n  client_id: c\n  client_secret: ${S}\n", 3,
		func(c *Config) Secret { return c.Scheduling.ClientSecret }},
	{"scheduling.client_secret_next", "scheduling:\n  client_id: c\n  client_secret: first\n  client_secret_next: ${S}\n", 4,
		func(c *Config) Secret { return c.Scheduling.ClientSecretNext }},
	{"server.connect_secret", "scheduling:\n  client_id: c\nserver:\n  public_url: https://syncd.example.com\n  connect_secret: ${S}\n", 5,
		func(c *Config) Secret { return c.Server.ConnectSecret }},
	{"sync.webhooks.secret", "sync:\n  webhooks:\n    public_url: https://syncd.example.com\n    secret: ${S}\n", 4,
		func(c *Config) Secret { return c.Sync.Webhooks.Secret }},
	{"forms_oauth.client_secret", "forms_oauth:\n  client_id: c\n  client_secret: ${S}\n", 3,
		func(c *Config) Secret { return c.FormsOAuth.ClientSecret }},
	{"accounts[].api_key", "accounts:\n  - name: a\n    api_key: ${S}\n", 3,
		func(c *Config) Secret { return c.Accounts[0].APIKey }},
}

// TestSecretCasesCoverEverySecret: the cases below cover every key of type
// Secret, so that a new secret is tested as the others are.
func TestSecretCasesCoverEverySecret(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range secretCases {
		covered[tc.key] = true
	}
	keys := secretFields(reflect.TypeOf(Config{}), "")
	for _, k := range keys {
		if !covered[k] {
			t.Errorf("secret key %s has no case in secretCases", k)
		}
	}
	if len(keys) != len(secretCases) {
		t.Errorf("secret keys %v, cases for %d", keys, len(secretCases))
	}
}

// secretFields lists the dotted keys of type Secret under t (accounts[]
// for the keys of each account).
func secretFields(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			path += "[]"
		}
		t = t.Elem()
	}
	if t == reflect.TypeOf(Secret("")) {
		return []string{path}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		out = append(out, secretFields(f.Type, join(path, tag))...)
	}
	return out
}

// TestUnsetSecretVariableNamesKeyAndLine: a secret set to an unset
// variable is an error naming the key and its line, as every other ${ENV}
// error does.
func TestUnsetSecretVariableNamesKeyAndLine(t *testing.T) {
	for _, tc := range secretCases {
		t.Run(tc.key, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.raw), env(map[string]string{"FORMS_API_KEY": "k"}))
			if err == nil {
				t.Fatal("accepted an unset variable")
			}
			key := strings.ReplaceAll(tc.key, "[]", "[0]")
			for _, w := range []string{"line " + strconv.Itoa(tc.line) + ": " + key + ":", "environment variable S is not set"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestSecretsAreExpandedOnce: a secret's ${ENV} is expanded once, after
// decoding: the variable's value is the secret as it is, even when it holds
// "${" (a random secret may), and never reaches a message.
func TestSecretsAreExpandedOnce(t *testing.T) {
	for _, value := range []string{
		"0123456789abcdef-${NOT_A_VARIABLE}", // expanded again: an error quoting part of the secret
		"0123456789abcdef-${X:-y}",           // expanded again: silently another secret
	} {
		for _, tc := range secretCases {
			t.Run(tc.key+"/"+value[17:], func(t *testing.T) {
				cfg, err := Parse("t.yaml", []byte(tc.raw), env(map[string]string{"FORMS_API_KEY": "k", "S": value}))
				if err != nil {
					if strings.Contains(err.Error(), "NOT_A_VARIABLE") {
						t.Errorf("the secret's value was expanded again, and its error quotes it: %v", err)
					}
					t.Fatal(err)
				}
				if got := tc.get(cfg).Reveal(); got != value {
					t.Errorf("%s = %q, want the variable's value %q as it is", tc.key, got, value)
				}
			})
		}
	}
}
