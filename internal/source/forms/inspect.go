package forms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/forms/schema"
	"github.com/syncd-dev/syncd/internal/table"
)

// Catalog is every form of the account, as the API lists them, and the
// table each is written to (`syncd forms`).
func (a *Account) Catalog(ctx context.Context) ([]source.CatalogEntry, error) {
	list, err := a.Client().ListForms(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]source.CatalogEntry, 0, len(list))
	for _, f := range list {
		tags := f.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, source.CatalogEntry{ID: f.FormID, Name: f.Name, Tags: tags, Table: formTable(a.cfg, f.FormID)})
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

// Describe reads the form id (`syncd schema`). A form the API says does
// not exist is an *UnknownFormError, naming the closest of the account's
// ids (Check); should the account's list fail, or hold the id after all,
// the error names no close ids, in the same words.
func (a *Account) Describe(ctx context.Context, id string) (source.Described, error) {
	client := a.Client()
	form, err := client.GetForm(ctx, id)
	if errors.Is(err, api.ErrNotFound) {
		var unknown *UnknownFormError
		if _, err := ListAndCheck(ctx, client, []string{id}); !errors.As(err, &unknown) {
			unknown = &UnknownFormError{IDs: []string{id}, Hint: []string{""}}
		}
		return nil, unknown
	}
	if err != nil {
		return nil, err
	}
	return &described{cfg: a.cfg, form: form, key: table.StreamKey(a.ac.Namespace(), form.ID)}, nil
}

// described is a form as the API describes it now.
type described struct {
	cfg  *config.Config
	form *api.Form
	key  string
}

// Key is the form's stream key in the state.
func (d *described) Key() string { return d.key }

// Schema is the table the form maps to: the schema a sync pinned (what
// the output holds), evolved with today's questions; without one, the
// mapping of today's questions.
func (d *described) Schema(pinned json.RawMessage, layout string) (source.TableSchema, error) {
	var t *schema.Table
	var err error
	if len(pinned) > 0 {
		p, uerr := schema.Unmarshal(pinned)
		if uerr != nil {
			return source.TableSchema{}, fmt.Errorf("read the pinned schema of form %s from the state: %w", d.form.ID, uerr)
		}
		t, _, err = p.Evolve(d.form)
	} else {
		t, _, err = schema.New(d.form, schema.Options{IncludeEditLink: d.cfg.Sync.IncludeEditLink})
	}
	if err != nil {
		return source.TableSchema{}, fmt.Errorf("map form %s: %w", d.form.ID, err)
	}
	out := source.TableSchema{ID: d.form.ID, Name: d.form.Name, Table: formTable(d.cfg, d.form.ID), Pinned: len(pinned) > 0,
		Columns: make([]source.Column, 0, len(t.Columns)), NotExported: passwordQuestions(d.form), Layout: layout}
	for _, c := range t.Columns {
		mode := "NULLABLE"
		if c.Required {
			mode = "REQUIRED"
		}
		out.Columns = append(out.Columns, source.Column{Name: c.Name, Type: string(c.Type), Mode: mode, Kind: string(c.Kind),
			SourceID: c.SourceID, SourceType: c.SourceType, SourceName: c.SourceName})
	}
	return out, nil
}

// passwordQuestions are the names of the form's Password questions, which
// no column holds.
func passwordQuestions(f *api.Form) []string {
	out := []string{}
	for _, q := range f.Questions {
		if q.Type == "Password" {
			out = append(out, q.Name)
		}
	}
	return out
}
