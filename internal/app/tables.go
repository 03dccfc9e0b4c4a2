package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
)

// AccountTable is one table of an account's output (`syncd tables`).
type AccountTable struct {
	Account string `json:"account"`
	sink.TableInfo
}

// ErrNoTables is the answer of a sink that keeps no table format (Parquet
// files, BigQuery): it has no snapshots to name.
var ErrNoTables = errors.New("the output keeps no table snapshots")

// ErrNoSuchTable is a table named that the output does not hold.
var ErrNoSuchTable = errors.New("no such table")

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

// CompactReport is what `syncd compact` did to one table of an account.
type CompactReport struct {
	Account string `json:"account"`
	icebergsink.TableReport
}

// Compact maintains the Iceberg tables of each account of names (all when
// none): compaction, snapshot expiry and orphan cleanup of each stream's
// table and its latest table, or of tables only. It holds each account's
// state for writing meanwhile, as a sync does: a syncd that syncs the
// account (or another compact) refuses to start, or this one does, so a
// stream's maintenance never runs beside its commits.
func Compact(ctx context.Context, cfg *config.Config, names, tables []string, log *zap.Logger) ([]CompactReport, error) {
	if cfg.Sink.Type != "iceberg" {
		return nil, fmt.Errorf("sink.type is %s: %w; syncd compact maintains Iceberg tables", cfg.Sink.Type, ErrNoTables)
	}
	accts, err := SelectAccounts(cfg, names)
	if err != nil {
		return nil, err
	}
	var out []CompactReport
	for _, a := range accts {
		reports, err := compactAccount(ctx, cfg, a, tables, log)
		for _, r := range reports {
			out = append(out, CompactReport{Account: a.Name, TableReport: r})
		}
		if err != nil {
			return out, fmt.Errorf("account %s: %w", a.Name, err)
		}
	}
	return out, nil
}

func compactAccount(ctx context.Context, cfg *config.Config, a config.Account, only []string, log *zap.Logger) ([]icebergsink.TableReport, error) {
	store, err := OpenStoreOf(ctx, cfg, a.Namespace())
	if err != nil {
		return nil, err
	}
	defer store.Close()
	s, err := NewAccountSink(cfg, a.Namespace(), "", log, nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ice, ok := s.(*icebergsink.Sink)
	if !ok {
		return nil, ErrNoTables
	}
	list, err := ice.Tables(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, t := range list {
		have[t.Table] = true
	}
	var names []string
	for _, t := range list {
		// Maintain takes a stream's table with its latest table.
		if base, isLatest := strings.CutSuffix(t.Table, icebergsink.LatestSuffix); isLatest && have[base] {
			continue
		}
		if len(only) > 0 && !slices.Contains(only, t.Table) {
			continue
		}
		names = append(names, t.Table)
	}
	for _, n := range only {
		if !have[n] {
			return nil, fmt.Errorf("%w: %s is not in Iceberg namespace %s (syncd tables lists them)", ErrNoSuchTable, n, ice.Namespace())
		}
	}
	var out []icebergsink.TableReport
	for _, n := range names {
		reports, err := ice.Maintain(ctx, n, ice.MaintainOptions())
		out = append(out, reports...)
		if err != nil {
			return out, fmt.Errorf("maintain table %s: %w", n, err)
		}
	}
	return out, nil
}
