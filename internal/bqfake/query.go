package bqfake

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/civil"
	bq "google.golang.org/api/bigquery/v2"
)

// query serves POST /projects/{project}/queries (jobs.query), the path
// the client takes for a query it reads at once. The fake runs the query
// with DuckDB over a copy of the tables it names (`project.dataset.table`,
// a view's name standing for its query): their top-level STRING, INTEGER,
// FLOAT, BOOLEAN, TIMESTAMP and DATE columns; a query of any other column
// fails as invalid. Standard SQL that both engines speak (GROUP BY,
// QUALIFY, window functions) runs as BigQuery runs it. The answer holds
// every row in one page.
func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	var in bq.QueryRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeAPIError(w, errInvalid("Invalid JSON payload received: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deny("bigquery.jobs.create", "Project "+project); err != nil {
		err.msg = fmt.Sprintf("Access Denied: Project %s: User does not have bigquery.jobs.create permission in project %s.", project, project)
		writeAPIError(w, err)
		return
	}
	if in.UseLegacySql != nil && *in.UseLegacySql || len(in.QueryParameters) > 0 || in.DryRun {
		s.tb.Errorf("bqfake: a query with legacy SQL, parameters or a dry run through jobs.query: the fake does not run those")
		writeAPIError(w, &apiError{http.StatusNotImplemented, "notImplemented", "bqfake runs standard SQL queries without parameters"})
		return
	}
	int64TS := in.FormatOptions != nil && in.FormatOptions.UseInt64Timestamp
	resp, err := s.runQuery(project, in.Query, int64TS)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	s.seq++
	resp.JobReference = &bq.JobReference{ProjectId: project, JobId: "job_bqfake_query_" + strconv.Itoa(s.seq), Location: in.Location}
	writeJSON(w, resp)
}

// runQuery copies the tables q names into DuckDB, runs q there and
// converts the answer. mu held.
func (s *Server) runQuery(project, q string, int64TS bool) (*bq.QueryResponse, error) {
	var temps []string
	defer func() {
		for _, t := range temps {
			_, _ = s.db.Exec(`DROP TABLE IF EXISTS ` + t)
		}
	}()
	sqlText, err := s.expand(q, &temps, 0)
	if err != nil {
		return nil, err
	}
	// BigQuery quotes identifiers with backticks, DuckDB with double
	// quotes (which BigQuery reads as strings).
	sqlText = quotedName.ReplaceAllString(sqlText, `"$1"`)
	rows, err := s.db.Query(sqlText)
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	defer rows.Close()
	cols, err := rows.ColumnTypes()
	if err != nil {
		return nil, errInvalid("%v", err)
	}
	resp := &bq.QueryResponse{Kind: "bigquery#queryResponse", JobComplete: true, Schema: &bq.TableSchema{}}
	for _, c := range cols {
		typ, err := bqType(c.DatabaseTypeName())
		if err != nil {
			return nil, errInvalid("column %s: %v", c.Name(), err)
		}
		resp.Schema.Fields = append(resp.Schema.Fields, &bq.TableFieldSchema{Name: c.Name(), Type: typ, Mode: "NULLABLE"})
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, errInvalid("%v", err)
		}
		row := &bq.TableRow{}
		for i, v := range vals {
			row.F = append(row.F, &bq.TableCell{V: cellValue(v, resp.Schema.Fields[i].Type, int64TS)})
		}
		resp.Rows = append(resp.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, errInvalid("%v", err)
	}
	resp.TotalRows = uint64(len(resp.Rows))
	return resp, nil
}

// quotedName is an identifier in backticks, once table references are
// replaced.
var quotedName = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)`")

// maxViewDepth bounds views over views.
const maxViewDepth = 8

// expand replaces each `project.dataset.table` of q with a DuckDB table
// holding a copy of its rows, or a view with its expanded query. mu held.
func (s *Server) expand(q string, temps *[]string, depth int) (string, error) {
	if depth > maxViewDepth {
		return "", errInvalid("Views nest deeper than %d levels.", maxViewDepth)
	}
	var failed error
	out := tableRef.ReplaceAllStringFunc(q, func(ref string) string {
		if failed != nil {
			return ref
		}
		m := tableRef.FindStringSubmatch(ref)
		p, d, t := m[1], m[2], m[3]
		if err := s.deny("bigquery.tables.getData", fmt.Sprintf("Table %s:%s.%s", p, d, t)); err != nil {
			failed = err
			return ref
		}
		tb := s.table(p, d, t)
		if tb == nil {
			failed = errNotFound("Table %s:%s.%s was not found", p, d, t)
			return ref
		}
		if tb.meta.View != nil {
			inner, err := s.expand(tb.meta.View.Query, temps, depth+1)
			if err != nil {
				failed = err
				return ref
			}
			return "(" + inner + ")"
		}
		name, err := s.copyTable(tb, len(*temps))
		if err != nil {
			failed = err
			return ref
		}
		*temps = append(*temps, name)
		return name
	})
	return out, failed
}

// duckTypes are the BigQuery types a query can read, as DuckDB's.
var duckTypes = map[string]string{
	"STRING": "VARCHAR", "INTEGER": "BIGINT", "FLOAT": "DOUBLE", "BOOLEAN": "BOOLEAN", "TIMESTAMP": "TIMESTAMP", "DATE": "DATE",
}

// copyTable copies the scalar top-level columns of tb into a DuckDB table
// named after n and returns its name. mu held.
func (s *Server) copyTable(tb *table, n int) (string, error) {
	name := "bqfake_query_" + strconv.Itoa(n)
	var cols, defs, marks []string
	for _, f := range tb.meta.Schema.Fields {
		typ, ok := duckTypes[f.Type]
		if !ok || f.Mode == "REPEATED" {
			continue
		}
		cols = append(cols, f.Name)
		defs = append(defs, `"`+f.Name+`" `+typ)
		marks = append(marks, "?")
	}
	if _, err := s.db.Exec(`CREATE TEMP TABLE ` + name + ` (` + strings.Join(defs, ", ") + `)`); err != nil {
		return "", fmt.Errorf("bqfake: copy table %s for a query: %w", tb.meta.Id, err)
	}
	if len(tb.rows) == 0 {
		return name, nil
	}
	tx, err := s.db.Begin()
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	ins, err := tx.Prepare(`INSERT INTO ` + name + ` VALUES (` + strings.Join(marks, ", ") + `)`)
	if err != nil {
		return "", fmt.Errorf("bqfake: copy table %s for a query: %w", tb.meta.Id, err)
	}
	defer ins.Close()
	for _, r := range tb.rows {
		args := make([]any, len(cols))
		for i, c := range cols {
			switch v := r[c].(type) {
			case civil.Date:
				args[i] = v.In(time.UTC)
			default:
				args[i] = v
			}
		}
		if _, err := ins.Exec(args...); err != nil {
			return "", fmt.Errorf("bqfake: copy table %s for a query: %w", tb.meta.Id, err)
		}
	}
	return name, tx.Commit()
}

// bqType names DuckDB's type of an answer's column as BigQuery's.
func bqType(duck string) (string, error) {
	switch duck {
	case "VARCHAR":
		return "STRING", nil
	case "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER":
		return "INTEGER", nil
	case "DOUBLE", "FLOAT":
		return "FLOAT", nil
	case "BOOLEAN":
		return "BOOLEAN", nil
	case "TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		return "TIMESTAMP", nil
	case "DATE":
		return "DATE", nil
	}
	return "", fmt.Errorf("type %s is not one the fake answers", duck)
}

// cellValue is a value as the REST API sends it: a string, or nil.
func cellValue(v any, typ string, int64TS bool) any {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case *big.Int:
		return v.String()
	case time.Time:
		if typ == "DATE" {
			return v.UTC().Format(time.DateOnly)
		}
		if int64TS {
			return strconv.FormatInt(v.UnixMicro(), 10)
		}
		return strconv.FormatFloat(float64(v.UnixMicro())/1e6, 'f', 6, 64)
	}
	return fmt.Sprint(v)
}
