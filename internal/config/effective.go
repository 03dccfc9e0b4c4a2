package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Effective is the configuration as syncd uses it, for `syncd config`:
// every key, with the defaults filled in and ${ENV} expanded, secrets as
// ***. Sections that are optional (sink.bigquery) are shown with their
// zero values when left out.
func (c *Config) Effective() Config {
	out := *c
	out.lines = nil
	out.Forms = append([]FormConfig{}, c.Forms...)
	if out.Scheduling == nil {
		out.Scheduling = &Scheduling{Scopes: []string{}}
	}
	if out.FormsOAuth == nil {
		out.FormsOAuth = &FormsOAuth{}
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
				keys = append(keys, p)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return keys
}

// isLeaf reports whether a struct type is one value in the file (a date).
func isLeaf(t reflect.Type) bool { return t == reflect.TypeOf(Date{}) }
