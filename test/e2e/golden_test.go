package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/poller"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// duckTypes is how DuckDB must see each column type in the Parquet output.
var duckTypes = map[schema.ColumnType]string{
	schema.TypeString:     "VARCHAR",
	schema.TypeDouble:     "DOUBLE",
	schema.TypeInt64:      "BIGINT",
	schema.TypeBool:       "BOOLEAN",
	schema.TypeListString: "VARCHAR[]",
	schema.TypeDate:       "DATE",
	schema.TypeTimestamp:  "TIMESTAMP WITH TIME ZONE",
	schema.TypeJSON:       "VARCHAR",
	schema.TypeDateRange:  "STRUCT(",
	schema.TypeAddress:    "STRUCT(",
	schema.TypeLocation:   "STRUCT(",
	schema.TypeScheduling: "STRUCT(",
	schema.TypePayment:    "STRUCT(",
	schema.TypeFiles:      "STRUCT(",
	schema.TypeDocuments:  "STRUCT(",
}

// TestGoldenEveryQuestionType syncs the simulator's form that holds every
// documented question type, reads the files back with DuckDB, and checks each
// column's type and, for a sample of submissions, every value against what
// the API served.
func TestGoldenEveryQuestionType(t *testing.T) {
	start, end := history(4)
	sim := testkit.StartSim(t, formsim.Config{Seed: 99, Forms: 1, Submissions: 400, Start: start, End: end})
	form := sim.FormIDs()[0]
	table := poller.DefaultTable(form)
	// By day, to check the partition column's type too (auto would keep
	// 400 rows in one folder).
	w := testkit.NewWorkdir(t, sim.BaseURL, testkit.Config{Partition: "day"})
	if res := testkit.Run(context.Background(), syncdBin, w, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	pinned := pinnedSchema(t, w, form)
	duck := testkit.OpenDuck(t)
	cols := duck.Columns(t, w.Out, table)

	// Every documented type is covered by the form, and mapped as documented.
	meta, _ := sim.Form(form)
	seen := map[string]bool{}
	for _, q := range meta.Questions {
		seen[q.Type] = true
	}
	for _, typ := range documentedTypes {
		if !seen[typ] {
			t.Errorf("the golden form lacks a %s question", typ)
		}
	}
	for _, c := range pinned.Columns {
		got, ok := cols[c.Name]
		if !ok {
			// A __v_json companion exists only once a value needed it.
			if c.Kind != schema.KindVariantJSON {
				t.Errorf("column %s (%s) is not in the files", c.Name, c.Type)
			}
			continue
		}
		if want := duckTypes[c.Type]; !strings.HasPrefix(got, want) {
			t.Errorf("column %s (%s from %s %s): DuckDB type %s, want %s", c.Name, c.Type, c.Kind, c.SourceType, got, want)
		}
	}
	for _, q := range meta.Questions {
		if q.Type == "Password" {
			for _, c := range pinned.Columns {
				if c.SourceID == q.ID {
					t.Errorf("Password question %s was exported as column %s", q.ID, c.Name)
				}
			}
		}
	}
	if cols["submission_date"] != "DATE" {
		t.Errorf("partition column submission_date: %q", cols["submission_date"])
	}

	// Values: compare a sample of rows with the API's own answers.
	ids := sim.ExpectedIDs(form)
	checked := map[schema.ColumnType]int{}
	for i := 0; i < len(ids); i += len(ids)/25 + 1 {
		api := fetchSubmission(t, sim, form, ids[i])
		row := duckRow(t, duck, w, table, ids[i])
		for _, ans := range api.Questions {
			col := columnFor(pinned, ans.ID, ans.Type)
			if col == nil {
				continue // Password, or a type syncd does not know
			}
			if compareValue(t, col, ans.Value, row) {
				checked[col.Type]++
			}
		}
		if got := row["submission_time"]; !sameInstant(got, api.SubmissionTime) {
			t.Errorf("submission %s: submission_time %v, API %v", ids[i], got, api.SubmissionTime)
		}
	}
	for ct := range duckTypes {
		if ct == schema.TypeDocuments || ct == schema.TypeScheduling || ct == schema.TypePayment {
			continue // not question types
		}
		if checked[ct] == 0 {
			t.Errorf("no %s value was compared: the sample proves nothing for it", ct)
		}
	}
}

var documentedTypes = strings.Fields(`Address AudioRecording Calcom Calendly Captcha Checkbox Checkboxes ColorPicker
CurrencyInput DatePicker DateRange DateTimePicker Dropdown EmailInput FileUpload ImagePicker LocationCoordinates
LongAnswer Matrix MultiSelect MultipleChoice NumberInput OpinionScale Password Payment PhoneNumber Ranking
RecordPicker ShortAnswer Signature Slider StarRating Subform SubmissionPicker Switch Table TimePicker URLInput`)

func pinnedSchema(t *testing.T, w *testkit.Workdir, form string) *schema.Table {
	t.Helper()
	ctx := context.Background()
	st, err := state.OpenBolt(ctx, state.BoltOptions{Path: w.State, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs, err := st.Get(ctx, form)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := schema.Unmarshal(fs.Schema)
	if err != nil {
		t.Fatalf("pinned schema: %v", err)
	}
	return tbl
}

func fetchSubmission(t *testing.T, sim *testkit.Sim, form, id string) *forms.Submission {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, sim.BaseURL+"/forms/"+form+"/submissions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testkit.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Submission forms.Submission `json:"submission"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode submission %s: %v", id, err)
	}
	return &out.Submission
}

// duckRow reads one submission's row as JSON values.
func duckRow(t *testing.T, duck *testkit.Duck, w *testkit.Workdir, table, id string) map[string]any {
	t.Helper()
	var raw string
	err := duck.DB.QueryRow("SELECT to_json(t)::VARCHAR FROM "+testkit.Scan(w.Out, table)+" t WHERE submission_id = ?", id).Scan(&raw)
	if err != nil {
		t.Fatalf("read row %s: %v", id, err)
	}
	row := map[string]any{}
	if err := json.Unmarshal([]byte(raw), &row); err != nil {
		t.Fatal(err)
	}
	return row
}

// columnFor is the column an answer of this id and type lands in.
func columnFor(tbl *schema.Table, id, typ string) *schema.Column {
	var byID *schema.Column
	for i := range tbl.Columns {
		c := &tbl.Columns[i]
		if c.Kind != schema.KindQuestion || c.SourceID != id {
			continue
		}
		if c.SourceType == typ {
			return c
		}
		byID = c
	}
	return byID
}

// compareValue checks one answer against its row; it reports whether a
// non-empty typed value was compared.
func compareValue(t *testing.T, col *schema.Column, apiValue json.RawMessage, row map[string]any) bool {
	t.Helper()
	var want any
	if err := json.Unmarshal(apiValue, &want); err != nil || isEmptyJSON(want) {
		if got := row[col.Name]; got != nil {
			t.Errorf("column %s: empty answer %s came out as %v", col.Name, apiValue, got)
		}
		return false
	}
	got := row[col.Name]
	if got == nil {
		// Did not fit: kept whole in the companion column.
		kept, _ := row[col.Name+"__v_json"].(string)
		var keptV any
		if json.Unmarshal([]byte(kept), &keptV) != nil || !reflect.DeepEqual(keptV, want) {
			t.Errorf("column %s (%s): value %s is neither in the column nor in %s__v_json (%q)", col.Name, col.Type, apiValue, col.Name, kept)
		}
		return false
	}
	ok := true
	switch col.Type {
	case schema.TypeString, schema.TypeDouble, schema.TypeInt64, schema.TypeBool, schema.TypeListString, schema.TypeDate:
		ok = looseEqual(got, want)
	case schema.TypeTimestamp:
		s, _ := want.(string)
		wt, err := time.Parse(time.RFC3339Nano, s)
		ok = err == nil && sameInstant(got, wt)
	case schema.TypeJSON:
		var gv any
		gs, _ := got.(string)
		ok = json.Unmarshal([]byte(gs), &gv) == nil && reflect.DeepEqual(gv, want)
	case schema.TypeAddress:
		m, _ := want.(map[string]any)
		g, _ := got.(map[string]any)
		ok = g != nil && looseEqual(g["city"], m["city"]) && looseEqual(g["zip_code"], m["zipCode"]) && looseEqual(g["address"], m["address"])
	case schema.TypeLocation:
		m, _ := want.(map[string]any)
		g, _ := got.(map[string]any)
		ok = g != nil && looseEqual(g["latitude"], m["latitude"]) && looseEqual(g["longitude"], m["longitude"])
	case schema.TypeDateRange:
		m, _ := want.(map[string]any)
		g, _ := got.(map[string]any)
		ok = g != nil && looseEqual(g["start"], m["start"]) && looseEqual(g["end"], m["end"])
	case schema.TypeFiles:
		wl, _ := want.([]any)
		gl, _ := got.([]any)
		ok = len(wl) == len(gl)
		for i := 0; ok && i < len(wl); i++ {
			wm, _ := wl[i].(map[string]any)
			gm, _ := gl[i].(map[string]any)
			ok = gm != nil && looseEqual(gm["url"], wm["url"]) && looseEqual(gm["filename"], wm["filename"])
		}
	}
	if !ok {
		t.Errorf("column %s (%s): DuckDB %v, API %s", col.Name, col.Type, got, apiValue)
	}
	return ok
}

func isEmptyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func looseEqual(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// sameInstant compares a DuckDB timestamp rendered by to_json with a time.
func sameInstant(got any, want time.Time) bool {
	s, _ := got.(string)
	for _, layout := range []string{"2006-01-02 15:04:05.999999Z07", "2006-01-02 15:04:05.999999Z07:00", time.RFC3339Nano, "2006-01-02 15:04:05Z07"} {
		if g, err := time.Parse(layout, s); err == nil {
			return g.Equal(want.Truncate(time.Microsecond))
		}
	}
	return false
}
