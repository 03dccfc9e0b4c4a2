package bqfake

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/civil"
	bq "google.golang.org/api/bigquery/v2"
)

// pqNode is one node of a Parquet file's schema tree as DuckDB's
// parquet_schema() reports it. The fake derives the BigQuery schema of an
// upload from this tree, the way BigQuery does, rather than trusting the
// Arrow schema stored in the footer.
type pqNode struct {
	name       string
	physical   string // "" for a group
	repetition string // REQUIRED, OPTIONAL, REPEATED
	converted  string
	logical    string
	children   []*pqNode
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// readSchema reads the schema tree of the Parquet file at path.
func readSchema(db *sql.DB, path string) (*pqNode, error) {
	rows, err := db.Query(`SELECT name, type, repetition_type, num_children, converted_type, logical_type FROM parquet_schema(` + sqlString(path) + `)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type flat struct {
		n     *pqNode
		kids  int
		isGrp bool
	}
	var list []flat
	for rows.Next() {
		var name string
		var typ, rep, conv, logical sql.NullString
		var kids sql.NullInt64
		if err := rows.Scan(&name, &typ, &rep, &kids, &conv, &logical); err != nil {
			return nil, err
		}
		list = append(list, flat{
			n:     &pqNode{name: name, physical: typ.String, repetition: rep.String, converted: conv.String, logical: logical.String},
			kids:  int(kids.Int64),
			isGrp: !typ.Valid,
		})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("the file has no schema")
	}
	// The rows are the tree in pre-order, each group followed by its
	// num_children subtrees.
	i := 0
	var build func() (*pqNode, error)
	build = func() (*pqNode, error) {
		if i >= len(list) {
			return nil, fmt.Errorf("truncated schema")
		}
		f := list[i]
		i++
		for k := 0; k < f.kids; k++ {
			c, err := build()
			if err != nil {
				return nil, err
			}
			f.n.children = append(f.n.children, c)
		}
		return f.n, nil
	}
	root, err := build()
	if err != nil {
		return nil, err
	}
	if i != len(list) {
		return nil, fmt.Errorf("schema has %d nodes outside its root", len(list)-i)
	}
	return root, nil
}

// fileFields maps the top-level Parquet columns to BigQuery fields, as
// BigQuery documents its Parquet conversions. listInference is the load's
// parquetOptions.enableListInference: without it a LIST group is loaded as
// the literal RECORD { REPEATED RECORD list { element } } it is.
func fileFields(root *pqNode, listInference bool) ([]*bq.TableFieldSchema, error) {
	var out []*bq.TableFieldSchema
	for _, c := range root.children {
		f, err := pqField(c, listInference)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func modeOf(repetition string) string {
	switch repetition {
	case "REQUIRED":
		return "REQUIRED"
	case "REPEATED":
		return "REPEATED"
	}
	return "NULLABLE"
}

func pqField(n *pqNode, listInference bool) (*bq.TableFieldSchema, error) {
	if n.physical == "" { // a group
		if listInference && (n.converted == "LIST" || strings.HasPrefix(n.logical, "ListType")) && len(n.children) == 1 {
			rep := n.children[0]
			elem := rep
			if rep.physical == "" && len(rep.children) == 1 && rep.name != "array" && rep.name != n.name+"_tuple" {
				elem = rep.children[0] // the standard three-level list
			}
			if elem == rep {
				// A two-level list: the repeated node is the element.
				cp := *rep
				cp.repetition = "OPTIONAL"
				elem = &cp
			}
			f, err := pqField(elem, listInference)
			if err != nil {
				return nil, err
			}
			if f.Mode == "REPEATED" {
				return nil, fmt.Errorf("field %s is an array of arrays, which BigQuery does not support", n.name)
			}
			f.Name = n.name
			f.Mode = "REPEATED"
			return f, nil
		}
		f := &bq.TableFieldSchema{Name: n.name, Type: "RECORD", Mode: modeOf(n.repetition)}
		for _, c := range n.children {
			cf, err := pqField(c, listInference)
			if err != nil {
				return nil, err
			}
			f.Fields = append(f.Fields, cf)
		}
		return f, nil
	}
	t, err := leafType(n)
	if err != nil {
		return nil, err
	}
	return &bq.TableFieldSchema{Name: n.name, Type: t, Mode: modeOf(n.repetition)}, nil
}

func leafType(n *pqNode) (string, error) {
	has := func(s string) bool { return strings.Contains(n.converted, s) || strings.Contains(n.logical, s) }
	switch n.physical {
	case "BOOLEAN":
		return "BOOLEAN", nil
	case "FLOAT", "DOUBLE":
		return "FLOAT", nil
	case "INT96":
		return "TIMESTAMP", nil
	case "INT32", "INT64":
		switch {
		case has("DATE"):
			return "DATE", nil
		case has("TIMESTAMP") || has("Timestamp"):
			if strings.Contains(n.logical, "isAdjustedToUTC=0") {
				return "DATETIME", nil
			}
			return "TIMESTAMP", nil
		case has("TIME"):
			return "TIME", nil
		case has("DECIMAL") || has("Decimal"):
			return "NUMERIC", nil
		}
		return "INTEGER", nil
	case "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY":
		switch {
		case has("UTF8") || has("String") || has("ENUM") || has("JSON"):
			return "STRING", nil
		case has("DECIMAL") || has("Decimal"):
			return "NUMERIC", nil
		}
		return "BYTES", nil
	}
	return "", fmt.Errorf("column %s has Parquet type %s, which the fake does not load", n.name, n.physical)
}

// readRows reads every row of the Parquet file at path with DuckDB, as
// column name -> value.
func readRows(db *sql.DB, path string) ([]map[string]any, error) {
	rows, err := db.Query(`SELECT * FROM read_parquet(` + sqlString(path) + `)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// convert turns a value read by DuckDB into what the fake stores for a
// column of field f: string, int64, float64, bool, []byte, time.Time (UTC,
// TIMESTAMP), civil.Date, civil.DateTime, civil.Time, []any (REPEATED,
// never nil), map[string]any (RECORD) or nil. It enforces what BigQuery
// enforces on load: no NULL in a REQUIRED field, no NULL array element.
func convert(v any, f *bq.TableFieldSchema, path string) (any, error) {
	if f.Mode == "REPEATED" {
		if v == nil {
			return []any{}, nil // BigQuery stores a NULL array as an empty one
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("field %s: expected an array, read %T", path, v)
		}
		out := make([]any, len(list))
		elem := *f
		elem.Mode = "REQUIRED"
		for i, e := range list {
			if e == nil {
				return nil, fmt.Errorf("Array cannot have a null element; error in writing field %s", path)
			}
			c, err := convert(e, &elem, path)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	if v == nil {
		if f.Mode == "REQUIRED" {
			return nil, fmt.Errorf("Required field %s cannot be null", path)
		}
		return nil, nil
	}
	switch normType(f.Type) {
	case "STRING":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "BYTES":
		if b, ok := v.([]byte); ok {
			return b, nil
		}
	case "INTEGER":
		switch x := v.(type) {
		case int64:
			return x, nil
		case int32:
			return int64(x), nil
		case int16:
			return int64(x), nil
		case int8:
			return int64(x), nil
		case uint32:
			return int64(x), nil
		}
	case "FLOAT":
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
	case "BOOLEAN":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "TIMESTAMP":
		if t, ok := v.(time.Time); ok {
			return t.UTC(), nil
		}
	case "DATETIME":
		if t, ok := v.(time.Time); ok {
			return civil.DateTimeOf(t.UTC()), nil
		}
	case "DATE":
		if t, ok := v.(time.Time); ok {
			return civil.DateOf(t.UTC()), nil
		}
	case "TIME":
		if t, ok := v.(time.Time); ok {
			return civil.TimeOf(t.UTC()), nil
		}
	case "RECORD":
		m, ok := v.(map[string]any)
		if !ok {
			break
		}
		out := make(map[string]any, len(f.Fields))
		for _, cf := range f.Fields {
			c, err := convert(lookupFold(m, cf.Name), cf, path+"."+cf.Name)
			if err != nil {
				return nil, err
			}
			out[cf.Name] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("field %s of type %s: cannot store a %T read from the file", path, f.Type, v)
}

// lookupFold finds a column case-insensitively, as BigQuery matches names.
func lookupFold(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}
