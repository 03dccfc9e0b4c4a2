package app

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/sink"
)

// AccountTable is one table of an account's output (`syncd tables`).
type AccountTable struct {
	Account string `json:"account"`
	sink.TableInfo
}

// ErrNoTables is the answer of a sink that keeps no table format (Parquet
// files, BigQuery): it has no snapshots to name.
var ErrNoTables = errors.New("the output keeps no table snapshots")

// OutputTables describes every table of the output of each account of
// names (all when none): the sink's own view (sink.Lister), read from the
// catalog, never from the state.
func OutputTables(ctx context.Context, cfg *config.Config, names []string, log *zap.Logger) ([]AccountTable, error) {
	accts, err := SelectAccounts(cfg, names)
	if err != nil {
		return nil, err
	}
	var out []AccountTable
	for _, a := range accts {
		s, err := NewAccountSink(cfg, a.Namespace(), "", log, nil)
		if err != nil {
			return nil, err
		}
		l, ok := s.(sink.Lister)
		if !ok {
			s.Close()
			return nil, fmt.Errorf("sink.type is %s: %w; `syncd state show` lists what the state committed", cfg.Sink.Type, ErrNoTables)
		}
		list, err := l.Tables(ctx)
		s.Close()
		if err != nil {
			return nil, fmt.Errorf("account %s: %w", a.Name, err)
		}
		for _, t := range list {
			out = append(out, AccountTable{Account: a.Name, TableInfo: t})
		}
	}
	return out, nil
}
