package app

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/table"
)

// FormsReader is the forms of one account as the commands that only read
// them see them (`syncd forms`, `syncd schema`): through the Forms API,
// never the state's writer.
type FormsReader struct {
	cfg    *config.Config
	acct   config.Account
	client *forms.Client
}

// ReadForms opens the forms of a configured account for reading: its
// key, or the sign-in the state holds now (ReadClient). An error is the
// account's configuration (no Forms API key) or sign-in.
func ReadForms(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger) (*FormsReader, error) {
	if !acct.HasForms() {
		return nil, fmt.Errorf("account %s has no Forms API key: this command reads forms", acct.Name)
	}
	client, _, err := ReadClient(ctx, cfg, acct, log, nil)
	if err != nil {
		return nil, err
	}
	return &FormsReader{cfg: cfg, acct: acct, client: client}, nil
}

// FormRow is one form of `syncd forms -o json`.
type FormRow struct {
	FormID string   `json:"form_id"`
	Name   string   `json:"name"`
	Tags   []string `json:"tags"`
	Table  string   `json:"table"` // where syncd writes it: forms[].table or the default name
}

// List is every form of the account, as the API lists them.
func (r *FormsReader) List(ctx context.Context) ([]FormRow, error) {
	list, err := r.client.ListForms(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]FormRow, 0, len(list))
	for _, f := range list {
		tags := f.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, FormRow{FormID: f.FormID, Name: f.Name, Tags: tags, Table: formTable(r.cfg, f.FormID)})
	}
	return out, nil
}

// formTable is the table a form is written to: forms[].table, or
// poller.DefaultTable.
func formTable(cfg *config.Config, formID string) string {
	for _, f := range cfg.Forms {
		if f.ID == formID && f.Table != "" {
			return f.Table
		}
	}
	return poller.DefaultTable(formID)
}

// FormMeta is one form of the account, as the API describes it now.
type FormMeta struct {
	form *forms.Form
	key  string
}

// ID is the form's id.
func (f *FormMeta) ID() string { return f.form.ID }

// Key is the form's stream key in the state.
func (f *FormMeta) Key() string { return f.key }

// Form reads the form formID. A form the API says does not exist is an
// *UnknownFormError: the one --form gives (CheckForms), naming the
// closest of the account's ids. Should the account's list fail, or hold
// the id after all, the error names no close ids, in the same words.
func (r *FormsReader) Form(ctx context.Context, formID string) (*FormMeta, error) {
	form, err := r.client.GetForm(ctx, formID)
	if errors.Is(err, forms.ErrNotFound) {
		var unknown *UnknownFormError
		if err := CheckForms(ctx, r.client, []string{formID}); !errors.As(err, &unknown) {
			unknown = &UnknownFormError{IDs: []string{formID}, Hint: []string{""}}
		}
		return nil, unknown
	}
	if err != nil {
		return nil, err
	}
	return &FormMeta{form: form, key: table.StreamKey(r.acct.Namespace(), form.ID)}, nil
}

// FormSchema is what `syncd schema FORM -o json` prints.
type FormSchema struct {
	FormID      string         `json:"form_id"`
	FormName    string         `json:"form_name"`
	Table       string         `json:"table"`
	Pinned      bool           `json:"pinned"` // true: the schema a sync pinned (what the output holds), evolved with today's questions
	Columns     []SchemaColumn `json:"columns"`
	NotExported []string       `json:"not_exported"` // Password questions
	// Layout is how the table's Parquet files are partitioned (none,
	// year, month, day), as the state records it; "" until its first
	// batch chooses it (or for BigQuery).
	Layout string `json:"layout"`
}

// SchemaColumn is one column of a FormSchema.
type SchemaColumn struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Mode       string `json:"mode"` // REQUIRED or NULLABLE
	Kind       string `json:"kind"` // fixed, lineage, question, calculation, url_parameter, ...
	SourceID   string `json:"source_id"`
	SourceType string `json:"source_type"`
	SourceName string `json:"source_name"`
}

// Schema is the table form maps to. stored is the state's view of the
// account's forms (with their pinned schemas): the pinned schema, when a
// sync has run, is what the output holds, evolved with today's questions;
// without one, the mapping of today's questions.
func (r *FormsReader) Schema(form *FormMeta, stored []status.Form) (FormSchema, error) {
	pinned, layout, err := pinnedSchema(form, stored)
	if err != nil {
		return FormSchema{}, err
	}
	var t *schema.Table
	if pinned != nil {
		t, _, err = pinned.Evolve(form.form)
	} else {
		t, _, err = schema.New(form.form, schema.Options{IncludeEditLink: r.cfg.Sync.IncludeEditLink})
	}
	if err != nil {
		return FormSchema{}, fmt.Errorf("map form %s: %w", form.ID(), err)
	}
	out := FormSchema{FormID: form.ID(), FormName: form.form.Name, Table: formTable(r.cfg, form.ID()), Pinned: pinned != nil,
		Columns: make([]SchemaColumn, 0, len(t.Columns)), NotExported: passwordQuestions(form.form), Layout: layout}
	if out.NotExported == nil {
		out.NotExported = []string{}
	}
	for _, c := range t.Columns {
		mode := "NULLABLE"
		if c.Required {
			mode = "REQUIRED"
		}
		out.Columns = append(out.Columns, SchemaColumn{Name: c.Name, Type: string(c.Type), Mode: mode, Kind: string(c.Kind),
			SourceID: c.SourceID, SourceType: c.SourceType, SourceName: c.SourceName})
	}
	return out, nil
}

// pinnedSchema is the schema the state pinned for form, if any, and the
// layout it records for its table.
func pinnedSchema(form *FormMeta, stored []status.Form) (pinned *schema.Table, layout string, err error) {
	for _, f := range stored {
		if f.Stream == form.Key() {
			layout = f.Layout
		}
		if f.Stream == form.Key() && len(f.PinnedSchema) > 0 {
			if pinned, err = schema.Unmarshal(f.PinnedSchema); err != nil {
				return nil, "", fmt.Errorf("read the pinned schema of form %s from the state: %w", form.ID(), err)
			}
		}
	}
	return pinned, layout, nil
}

func passwordQuestions(f *forms.Form) []string {
	var out []string
	for _, q := range f.Questions {
		if q.Type == "Password" {
			out = append(out, q.Name)
		}
	}
	return out
}
