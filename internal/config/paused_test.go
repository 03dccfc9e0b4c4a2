package config

import (
	"slices"
	"testing"
)

func TestPausedForms(t *testing.T) {
	withKey := env(map[string]string{"FORMS_API_KEY": "k"})
	for _, tc := range []struct {
		name, raw string
		want      []string
	}{
		{"listed and excluded",
			"accounts:\n  - name: acme\n    api_key: k\n    forms: [{id: f1}, {id: f2}]\n    exclude: [f2, f9]\n",
			[]string{"accounts[0] (acme): form f2 is in forms[1] and in exclude, so it is not synced: remove it from exclude to sync it"}},
		{"excluded from a tag selection", "accounts:\n  - name: acme\n    api_key: k\n    tags: [t]\n    exclude: [f2]\n", nil},
		{"listed, nothing excluded", "accounts:\n  - name: acme\n    api_key: k\n    forms: [{id: f1}]\n", nil},
		{"the second account", "accounts:\n  - {name: a, api_key: k}\n  - name: b\n    api_key: k\n    forms: [{id: f1}]\n    exclude: [f1]\n",
			[]string{"accounts[1] (b): form f1 is in forms[0] and in exclude, so it is not synced: remove it from exclude to sync it"}},
		{"one account, no accounts list", "forms: [{id: f1}]\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(tc.raw), withKey)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.PausedForms(); !slices.Equal(got, tc.want) {
				t.Errorf("PausedForms() = %q, want %q", got, tc.want)
			}
		})
	}
}
