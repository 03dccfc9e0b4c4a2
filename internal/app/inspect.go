package app

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/status"
)

// FormsReader is the forms of one account as the commands that only read
// them see them (`syncd forms`, `syncd schema`): the forms source opened
// to read only, as it inspects itself (source.Inspector), never the
// state's writer.
type FormsReader struct {
	insp source.Inspector
}

// ReadForms opens the forms of a configured account for reading: its
// key, or the sign-in the state holds now. An error is the account's
// configuration (no Forms API key) or sign-in.
func ReadForms(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger) (*FormsReader, error) {
	a, err := readOnlyForms(ctx, source.Env{Config: cfg, Account: acct, Store: readOnlyState{cfg: cfg}, Log: log})
	if err != nil {
		return nil, err
	}
	insp, ok := a.(source.Inspector)
	if !ok {
		return nil, fmt.Errorf("the %s source of account %s cannot be inspected", poller.SourceForms, acct.Name)
	}
	return &FormsReader{insp: insp}, nil
}

// FormRow is one form of `syncd forms -o json`.
type FormRow = source.CatalogEntry

// List is every form of the account, as the API lists them.
func (r *FormsReader) List(ctx context.Context) ([]FormRow, error) {
	return r.insp.Catalog(ctx)
}

// FormMeta is one form of the account, as the API describes it now: Key
// is its stream key in the state.
type FormMeta = source.Described

// Form reads the form formID. A form the API says does not exist is a
// refused id (IsBadID) naming the closest of the account's ids.
func (r *FormsReader) Form(ctx context.Context, formID string) (FormMeta, error) {
	return r.insp.Describe(ctx, formID)
}

// FormSchema is what `syncd schema FORM -o json` prints.
type FormSchema = source.TableSchema

// SchemaColumn is one column of a FormSchema.
type SchemaColumn = source.Column

// Schema is the table form maps to. stored is the state's view of the
// account's forms (with their pinned schemas): the pinned schema, when a
// sync has run, is what the output holds, evolved with today's questions;
// without one, the mapping of today's questions.
func (r *FormsReader) Schema(form FormMeta, stored []status.Form) (FormSchema, error) {
	var pinned json.RawMessage
	layout := ""
	for _, f := range stored {
		if f.Stream != form.Key() {
			continue
		}
		layout = f.Layout
		if len(f.PinnedSchema) > 0 {
			pinned = f.PinnedSchema
		}
	}
	return form.Schema(pinned, layout)
}
