package icebergrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/iceberg-go"
)

// state is what Options.StateFile keeps: the catalog's own data. Metadata
// lives in the warehouse.
type state struct {
	Namespaces []stateNamespace `json:"namespaces"`
	Tables     []stateTable     `json:"tables"`
}

type stateNamespace struct {
	Namespace  []string           `json:"namespace"`
	Properties iceberg.Properties `json:"properties"`
}

type stateTable struct {
	Identifier       []string `json:"identifier"`
	MetadataLocation string   `json:"metadata-location"`
}

// saveState rewrites the state file (write to a temporary file, then
// rename); mu is held.
func (s *Server) saveState() error {
	if s.opts.StateFile == "" {
		return nil
	}
	var st state
	for _, k := range sortedKeys(s.namespaces) {
		st.Namespaces = append(st.Namespaces, stateNamespace{Namespace: splitKey(k), Properties: s.namespaces[k]})
	}
	for _, k := range sortedKeys(s.tables) {
		t := s.tables[k]
		st.Tables = append(st.Tables, stateTable{Identifier: t.ident, MetadataLocation: t.metaLoc})
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.opts.StateFile), ".icebergrest-state-*")
	if err != nil {
		return fmt.Errorf("icebergrest: save state: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("icebergrest: save state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("icebergrest: save state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.opts.StateFile); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("icebergrest: save state: %w", err)
	}
	return nil
}

// loadState reads the state file, if there is one, and each table's
// current metadata through io.
func (s *Server) loadState() error {
	if s.opts.StateFile == "" {
		return nil
	}
	b, err := os.ReadFile(s.opts.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("icebergrest: read state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("icebergrest: read state %s: %w", s.opts.StateFile, err)
	}
	for _, n := range st.Namespaces {
		props := n.Properties
		if props == nil {
			props = iceberg.Properties{}
		}
		s.namespaces[nsKey(n.Namespace)] = props
	}
	for _, t := range st.Tables {
		meta, err := s.readMetadata(context.Background(), t.MetadataLocation)
		if err != nil {
			return fmt.Errorf("icebergrest: read state: table %v: %w", t.Identifier, err)
		}
		s.tables[tableKey(t.Identifier)] = &tableEntry{ident: t.Identifier, metaLoc: t.MetadataLocation, meta: meta}
	}
	return nil
}
