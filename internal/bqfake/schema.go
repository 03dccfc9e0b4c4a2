package bqfake

import (
	"fmt"
	"strings"

	bq "google.golang.org/api/bigquery/v2"
)

// normType maps the standard SQL names the API accepts to the legacy names
// it reports back, so that schemas compare by meaning.
func normType(t string) string {
	switch u := strings.ToUpper(t); u {
	case "INT64":
		return "INTEGER"
	case "FLOAT64":
		return "FLOAT"
	case "BOOL":
		return "BOOLEAN"
	case "STRUCT":
		return "RECORD"
	default:
		return u
	}
}

func normMode(m string) string {
	if m == "" {
		return "NULLABLE"
	}
	return strings.ToUpper(m)
}

var knownTypes = map[string]bool{
	"STRING": true, "BYTES": true, "INTEGER": true, "FLOAT": true, "BOOLEAN": true, "TIMESTAMP": true,
	"DATE": true, "TIME": true, "DATETIME": true, "NUMERIC": true, "BIGNUMERIC": true, "GEOGRAPHY": true,
	"JSON": true, "RECORD": true, "INTERVAL": true,
}

// reservedPrefixes may not start a column name.
var reservedPrefixes = []string{"_TABLE_", "_FILE_", "_PARTITION", "_ROW_TIMESTAMP", "__ROOT__", "_COLIDENTIFIER"}

// checkName applies BigQuery's column name rules (the classic ones; the
// fake does not implement flexible column names).
func checkName(name string) error {
	ok := name != "" && len(name) <= 300 && (name[0] == '_' || isLetter(name[0]))
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c == '_' || isLetter(c) || c >= '0' && c <= '9'
	}
	if !ok {
		return fmt.Errorf("Invalid field name %q. Fields must contain only letters, numbers, and underscores, start with a letter or underscore, and be at most 300 characters long.", name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(strings.ToUpper(name), p) {
			return fmt.Errorf("Invalid field name %q. Field names cannot start with the reserved prefix %s.", name, p)
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// normalizeFields validates a schema given to tables.insert (or derived
// from a file) and returns a copy in the form the API reports: legacy type
// names and explicit modes.
func normalizeFields(fs []*bq.TableFieldSchema, prefix string, depth int) ([]*bq.TableFieldSchema, error) {
	if depth > 15 {
		return nil, fmt.Errorf("Field %s is nested more than 15 levels deep", strings.TrimSuffix(prefix, "."))
	}
	seen := map[string]bool{}
	out := make([]*bq.TableFieldSchema, 0, len(fs))
	for _, f := range fs {
		if f == nil {
			return nil, fmt.Errorf("Empty field in the schema of %s", strings.TrimSuffix(prefix, "."))
		}
		path := prefix + f.Name
		if err := checkName(f.Name); err != nil {
			return nil, err
		}
		key := strings.ToLower(f.Name)
		if seen[key] {
			return nil, fmt.Errorf("Field %s already exists in schema", path)
		}
		seen[key] = true
		t := normType(f.Type)
		if !knownTypes[t] {
			return nil, fmt.Errorf("Invalid value for type: %s is not a valid value (field %s)", f.Type, path)
		}
		m := normMode(f.Mode)
		if m != "NULLABLE" && m != "REQUIRED" && m != "REPEATED" {
			return nil, fmt.Errorf("Invalid value for mode: %s is not a valid value (field %s)", f.Mode, path)
		}
		if len([]rune(f.Description)) > 1024 {
			return nil, fmt.Errorf("The description for field %s is too long. The maximum length is 1024 characters.", path)
		}
		nf := &bq.TableFieldSchema{Name: f.Name, Type: t, Mode: m, Description: f.Description}
		switch {
		case t == "RECORD" && len(f.Fields) == 0:
			return nil, fmt.Errorf("Field %s is type RECORD but has no schema", path)
		case t != "RECORD" && len(f.Fields) > 0:
			return nil, fmt.Errorf("Field %s is type %s but has a schema", path, t)
		case t == "RECORD":
			sub, err := normalizeFields(f.Fields, path+".", depth+1)
			if err != nil {
				return nil, err
			}
			nf.Fields = sub
		}
		out = append(out, nf)
	}
	return out, nil
}

func findField(fs []*bq.TableFieldSchema, name string) *bq.TableFieldSchema {
	for _, f := range fs {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

func hasRequired(f *bq.TableFieldSchema) bool {
	return f.Mode == "REQUIRED"
}

// evolve checks a schema given to tables.patch against the table's schema,
// by BigQuery's rules: no column removed, no type changed, modes only
// relaxed from REQUIRED to NULLABLE, new columns NULLABLE or REPEATED (a new
// RECORD may hold REQUIRED fields). It returns the new schema.
func evolve(table string, old, next []*bq.TableFieldSchema, prefix string) ([]*bq.TableFieldSchema, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("Provided Schema does not match Table %s. "+format, append([]any{table}, a...)...)
	}
	for _, of := range old {
		if findField(next, of.Name) == nil {
			return nil, bad("Field %s is missing in new schema", prefix+of.Name)
		}
	}
	out := make([]*bq.TableFieldSchema, 0, len(next))
	for _, nf := range next {
		path := prefix + nf.Name
		of := findField(old, nf.Name)
		if of == nil {
			if hasRequired(nf) {
				return nil, bad("Cannot add required fields to an existing schema. (field: %s)", path)
			}
			out = append(out, nf)
			continue
		}
		if of.Type != nf.Type {
			return nil, bad("Field %s has changed type from %s to %s", path, of.Type, nf.Type)
		}
		if of.Mode != nf.Mode && !(of.Mode == "REQUIRED" && nf.Mode == "NULLABLE") {
			return nil, bad("Field %s has changed mode from %s to %s", path, of.Mode, nf.Mode)
		}
		if nf.Type == "RECORD" {
			sub, err := evolve(table, of.Fields, nf.Fields, path+".")
			if err != nil {
				return nil, err
			}
			cp := *nf
			cp.Fields = sub
			nf = &cp
		}
		out = append(out, nf)
	}
	return out, nil
}

// loadRules are the schema update options of a load job.
type loadRules struct {
	allowAdd, allowRelax bool
}

// mergeLoad checks the schema of an uploaded file against the table's, as a
// WRITE_APPEND load does, and returns the table's schema after the load.
//
// One rule is stricter than BigQuery is known to be: a REQUIRED column in
// the file where the table column is NULLABLE is refused. Reports differ on
// whether the service accepts it, so the fake makes a sink that relies on
// it fail here rather than in production.
func mergeLoad(table string, tbl, file []*bq.TableFieldSchema, rules loadRules, prefix string) ([]*bq.TableFieldSchema, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("Provided Schema does not match Table %s. "+format, append([]any{table}, a...)...)
	}
	out := make([]*bq.TableFieldSchema, 0, len(tbl)+len(file))
	for _, tf := range tbl {
		cp := *tf
		out = append(out, &cp)
	}
	for _, ff := range file {
		path := prefix + ff.Name
		i := -1
		for k, tf := range out {
			if strings.EqualFold(tf.Name, ff.Name) {
				i = k
			}
		}
		if i < 0 {
			switch {
			case !rules.allowAdd:
				return nil, bad("Cannot add fields (field: %s)", path)
			case ff.Mode == "REQUIRED":
				return nil, bad("Cannot add required fields to an existing schema. (field: %s)", path)
			}
			out = append(out, ff)
			continue
		}
		tf := out[i]
		if tf.Type != ff.Type {
			return nil, bad("Field %s has changed type from %s to %s", path, tf.Type, ff.Type)
		}
		if tf.Mode != ff.Mode {
			if tf.Mode == "REQUIRED" && ff.Mode == "NULLABLE" && rules.allowRelax {
				tf.Mode = "NULLABLE"
			} else {
				return nil, bad("Field %s has changed mode from %s to %s", path, tf.Mode, ff.Mode)
			}
		}
		if tf.Type == "RECORD" {
			sub, err := mergeLoad(table, tf.Fields, ff.Fields, rules, path+".")
			if err != nil {
				return nil, err
			}
			tf.Fields = sub
		}
	}
	for _, tf := range tbl {
		if tf.Mode == "REQUIRED" && findField(file, tf.Name) == nil {
			return nil, fmt.Errorf("Missing required field: %s.", prefix+tf.Name)
		}
	}
	return out, nil
}

// cloneFields deep-copies a schema.
func cloneFields(fs []*bq.TableFieldSchema) []*bq.TableFieldSchema {
	if fs == nil {
		return nil
	}
	out := make([]*bq.TableFieldSchema, len(fs))
	for i, f := range fs {
		cp := *f
		cp.Fields = cloneFields(f.Fields)
		out[i] = &cp
	}
	return out
}
