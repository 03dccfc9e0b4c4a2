package config_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
)

func withAPIKey(name string) (string, bool) {
	if name == "FORMS_API_KEY" {
		return "sk_test_SECRET", true
	}
	return "", false
}

// TestFormsShareNoTable: a form whose table is another form's default
// (form_ + its folded id, as poller.DefaultTable names it) would share it,
// and a refresh of one would remove the other's rows: a config error naming
// the key, its line and both forms.
func TestFormsShareNoTable(t *testing.T) {
	tests := []struct {
		name, raw string
		want      []string // every fragment must appear in the error; none: valid
	}{
		{"table of one is the default of another",
			"forms:\n  - {id: rrlrgvcxuigh, table: form_prxxrts5vi1w}\n  - {id: prxxrts5vi1w}\n",
			[]string{"line 2", "forms[0].table", "rrlrgvcxuigh", "prxxrts5vi1w", "form_prxxrts5vi1w", "refresh"}},
		{"the default first, the table in another case",
			"forms:\n  - {id: prxxrts5vi1w}\n  - {id: rrlrgvcxuigh, table: FORM_PRXXRTS5VI1W}\n",
			[]string{"line 3", "forms[1].table", "rrlrgvcxuigh", "prxxrts5vi1w"}},
		{"a default with the digit prefix",
			fmt.Sprintf("forms:\n  - {id: 8fKq2m}\n  - {id: vLp2aX, table: %s}\n", poller.DefaultTable("8fKq2m")),
			[]string{"forms[1].table", "8fKq2m", "vLp2aX"}},
		{"two ids that fold to one default",
			"forms:\n  - {id: my-form}\n  - {id: my.form}\n",
			[]string{"line 3", "forms[1].id", "my-form", "my.form", "form_my_form"}},
		{"two explicit tables",
			"forms:\n  - {id: a, table: signups}\n  - {id: b, table: signups}\n",
			[]string{"forms[1].table", "signups"}},
		{"within an account",
			"accounts:\n  - name: acme\n    api_key: k\n    forms:\n      - {id: prxxrts5vi1w}\n      - {id: rrlrgvcxuigh, table: form_prxxrts5vi1w}\n",
			[]string{"line 6", "accounts[0].forms[1].table", "rrlrgvcxuigh", "prxxrts5vi1w"}},
		{"a form's table is the bookings'",
			"scheduling:\n  client_id: c\nforms:\n  - {id: abc, table: bookings}\n",
			[]string{"line 4", "forms[0].table", "abc", "bookings", "refresh"}},
		{"an account's form's table is its bookings'",
			"scheduling:\n  client_id: c\n  bookings: {table: calls}\naccounts:\n  - name: acme\n    api_key: k\n    scheduling: true\n    forms: [{id: abc, table: Calls}]\n",
			[]string{"accounts[0].forms[0].table", "abc", "Calls"}},
		{"the bookings' table is a form's default",
			"scheduling:\n  client_id: c\n  bookings: {table: form_abc}\nforms:\n  - {id: abc}\n",
			[]string{"scheduling.bookings.table", "abc", "form_abc"}},
		{"an account without bookings may name a form's table bookings",
			"scheduling:\n  client_id: c\naccounts:\n  - {name: a, api_key: k, forms: [{id: x, table: bookings}]}\n  - {name: b, scheduling: true}\n", nil},
		{"a form's own default as its table", "forms:\n  - {id: abc, table: form_abc}\n  - {id: def}\n", nil},
		{"one table name in two accounts (their own folders)",
			"accounts:\n  - {name: a, api_key: k, forms: [{id: x, table: t}]}\n  - {name: b, api_key: k, forms: [{id: y, table: t}]}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("t.yaml", []byte(tt.raw), withAPIKey)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("a valid config refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("two forms share a table, and the config loads")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestFloatSettingsAreFinite: YAML reads .nan and .inf as floats, and NaN
// passes a "<= 0" check; every float setting refuses them (and what is not
// positive), naming its key and line.
func TestFloatSettingsAreFinite(t *testing.T) {
	sections := map[string]string{
		"source.rate_limit":     "source:\n  rate_limit: %s\n",
		"scheduling.rate_limit": "scheduling:\n  rate_limit: %s\n  client_id: c\n",
	}
	// Every float64 of Config must be one of these: a new one needs the
	// check, and a line here.
	var floats []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Float32, reflect.Float64:
			floats = append(floats, path)
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
				if !f.IsExported() || tag == "" || tag == "-" {
					continue
				}
				key := tag
				if path != "" {
					key = path + "." + tag
				}
				walk(f.Type, key)
			}
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	for _, k := range floats {
		if _, ok := sections[k]; !ok {
			t.Errorf("float setting %s is not tested: check it with positiveFinite (or as it needs) and add it here", k)
		}
	}
	for key, section := range sections {
		if !slices.Contains(floats, key) {
			t.Errorf("%s is tested but is no float setting of Config", key)
		}
		for _, v := range []string{".nan", ".NaN", ".inf", "+.inf", "-.inf", "-1"} {
			t.Run(key+"="+v, func(t *testing.T) {
				_, err := config.Parse("t.yaml", []byte(fmt.Sprintf(section, v)), withAPIKey)
				if err == nil {
					t.Fatalf("%s: %s accepted", key, v)
				}
				for _, w := range []string{key, "line 2", "positive number"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			})
		}
	}
}
