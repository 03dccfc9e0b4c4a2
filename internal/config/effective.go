package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Effective is the configuration as syncd uses it, for `syncd config`:
// every key, with the defaults filled in and ${ENV} expanded, secrets as
// ***. A listed form shows the table, start date and schedule it is synced
// with (form_ + its folded id, sync.start_date, sync.schedule when it sets
// none). Sections that are optional (sink.bigquery) are shown with their
// zero values when left out.
func (c *Config) Effective() Config {
	out := *c
	out.lines = nil
	out.Forms = c.effectiveForms(c.Forms)
	if c.Accounts != nil {
		out.Accounts = make([]Account, len(c.Accounts))
		for i, a := range c.Accounts {
			a.Forms = c.effectiveForms(a.Forms)
			out.Accounts[i] = a
		}
	}
	if out.Scheduling == nil {
		out.Scheduling = &Scheduling{Scopes: []string{}}
	}
	if out.FormsOAuth == nil {
		out.FormsOAuth = &FormsOAuth{}
	}
	if out.Sink.Iceberg == nil {
		ic := &IcebergSink{}
		ic.setDefaults(out.State)
		out.Sink.Iceberg = ic
	}
	if out.Sink.BigQuery == nil {
		out.Sink.BigQuery = &BigQuerySink{}
	}
	if out.Sink.BigQuery.Clustering == nil {
		b := *out.Sink.BigQuery
		b.Clustering = []string{}
		out.Sink.BigQuery = &b
	}
	return out
}

// effectiveForms is a copy of list with each form's defaults filled in, as
// the app applies them (Account.Job, DaemonEntries).
func (c *Config) effectiveForms(list []FormConfig) []FormConfig {
	out := make([]FormConfig, len(list))
	for i, f := range list {
		f.Table = effectiveTable(f)
		if f.StartDate.IsZero() {
			f.StartDate = c.Sync.StartDate
		}
		if f.Schedule == "" {
			f.Schedule = c.Sync.Schedule
		}
		out[i] = f
	}
	return out
}

// EffectiveMap is Effective as nested maps (for JSON): the same keys and
// values as its YAML.
func (c *Config) EffectiveMap() (map[string]any, error) {
	raw, err := yaml.Marshal(c.Effective())
	if err != nil {
		return nil, fmt.Errorf("print the configuration: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("print the configuration: %w", err)
	}
	return m, nil
}

// Keys lists every dotted key of the configuration file, as its yaml tags
// spell them (forms[].id for the keys of each form), in struct order.
func Keys() []string {
	var keys []string
	walkKeys(func(key string, _ reflect.Type) { keys = append(keys, key) })
	return keys
}

// keysOfType is the set of keys (as Keys spells them) whose values are of
// type t.
func keysOfType(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	walkKeys(func(key string, kt reflect.Type) {
		if kt == t {
			keys[key] = true
		}
	})
	return keys
}

// walkKeys calls fn with every key of Keys and the type of its value.
func walkKeys(fn func(key string, t reflect.Type)) {
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			p := join(path, tag)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), p+"[]")
			case ft.Kind() == reflect.Struct && !isLeaf(ft):
				walk(ft, p)
			default:
				fn(p, ft)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// isLeaf reports whether a struct type is one value in the file (a date).
func isLeaf(t reflect.Type) bool { return t == reflect.TypeOf(Date{}) }
