package icebergrest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/klauspost/compress/zstd"
)

// restIdent is the spec's TableIdentifier.
type restIdent struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (id restIdent) ident() []string { return append(slices.Clone(id.Namespace), id.Name) }

// apiError is an answer in the spec's ErrorModel.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func (e *apiError) write(w http.ResponseWriter) { writeError(w, e.status, e.typ, e.msg) }

func errNoSuchTable(ident []string) *apiError {
	return &apiError{http.StatusNotFound, "NoSuchTableException", "Table does not exist: " + strings.Join(ident, ".")}
}

func errNoSuchNamespace(ns []string) *apiError {
	return &apiError{http.StatusNotFound, "NoSuchNamespaceException", "Namespace does not exist: " + strings.Join(ns, ".")}
}

func errBadRequest(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "BadRequestException", fmt.Sprintf(format, a...)}
}

func errInternal(err error) *apiError {
	return &apiError{http.StatusInternalServerError, "InternalServerError", err.Error()}
}

// pathTable is the {ns} and {table} path parameters as an identifier.
func pathTable(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return nil, false
	}
	name := r.PathValue("table")
	if name == "" {
		writeError(w, http.StatusBadRequest, "BadRequestException", "empty table name")
		return nil, false
	}
	return append(ns, name), true
}

// loadResult is the spec's LoadTableResult for t.
func (s *Server) loadResult(t *tableEntry) map[string]any {
	cfg := iceberg.Properties{}
	for k, v := range s.opts.TableConfig {
		cfg[k] = v
	}
	rsp := map[string]any{"metadata": t.meta, "config": cfg}
	if t.metaLoc != "" {
		rsp["metadata-location"] = t.metaLoc
	}
	return rsp
}

func (s *Server) listTables(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	if _, ok := s.namespaces[nsKey(ns)]; !ok {
		s.mu.Unlock()
		noSuchNamespace(w, ns)
		return
	}
	var names []string
	for _, t := range s.tables {
		if slices.Equal(t.ident[:len(t.ident)-1], ns) {
			names = append(names, t.ident[len(t.ident)-1])
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	names, next, ok := page(w, r, names)
	if !ok {
		return
	}
	ids := make([]restIdent, len(names))
	for i, n := range names {
		ids[i] = restIdent{Namespace: ns, Name: n}
	}
	rsp := map[string]any{"identifiers": ids}
	if next != "" {
		rsp["next-page-token"] = next
	}
	writeJSON(w, http.StatusOK, rsp)
}

// defaultLocation is where a table goes without an explicit location; mu
// is held.
func (s *Server) defaultLocation(ns []string, name string) (string, error) {
	if l := s.namespaces[nsKey(ns)]["location"]; l != "" {
		return url.JoinPath(l, name)
	}
	return url.JoinPath(s.opts.Warehouse, append(slices.Clone(ns), name)...)
}

func (s *Server) createTable(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Name          string                        `json:"name"`
		Location      string                        `json:"location"`
		Schema        *iceberg.Schema               `json:"schema"`
		PartitionSpec *iceberg.UnboundPartitionSpec `json:"partition-spec"`
		WriteOrder    *table.UnboundSortOrder       `json:"write-order"`
		StageCreate   bool                          `json:"stage-create"`
		Properties    iceberg.Properties            `json:"properties"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" || req.Schema == nil {
		errBadRequest("create table needs a name and a schema").write(w)
		return
	}
	ident := append(slices.Clone(ns), req.Name)
	var spec *iceberg.PartitionSpec
	if req.PartitionSpec != nil {
		spec = &req.PartitionSpec.PartitionSpec
	}
	order := table.UnsortedSortOrder
	if req.WriteOrder != nil {
		order = req.WriteOrder.SortOrder
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.namespaces[nsKey(ns)]; !ok {
		noSuchNamespace(w, ns)
		return
	}
	k := tableKey(ident)
	if _, ok := s.tables[k]; ok {
		writeError(w, http.StatusConflict, "AlreadyExistsException", "Table already exists: "+strings.Join(ident, "."))
		return
	}
	loc := strings.TrimSuffix(req.Location, "/")
	if loc == "" {
		var err error
		if loc, err = s.defaultLocation(ns, req.Name); err != nil {
			errBadRequest("table location: %v", err).write(w)
			return
		}
	}
	meta, err := table.NewMetadata(req.Schema, spec, order, loc, req.Properties)
	if err != nil {
		errBadRequest("create table %s: %v", strings.Join(ident, "."), err).write(w)
		return
	}
	t := &tableEntry{ident: ident, meta: meta}
	if req.StageCreate {
		// Nothing is created until a commit with assert-create.
		writeJSON(w, http.StatusOK, s.loadResult(t))
		return
	}
	if t.metaLoc, err = newMetadataLocation(meta, 0); err != nil {
		errBadRequest("%v", err).write(w)
		return
	}
	if err := s.writeMetadata(r.Context(), meta, t.metaLoc); err != nil {
		errInternal(err).write(w)
		return
	}
	s.tables[k] = t
	if err := s.saveState(); err != nil {
		delete(s.tables, k)
		errInternal(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.loadResult(t))
}

func (s *Server) registerTable(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Name        string `json:"name"`
		MetadataLoc string `json:"metadata-location"`
		Overwrite   bool   `json:"overwrite"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" || req.MetadataLoc == "" {
		errBadRequest("register table needs a name and a metadata-location").write(w)
		return
	}
	ident := append(slices.Clone(ns), req.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.namespaces[nsKey(ns)]; !ok {
		noSuchNamespace(w, ns)
		return
	}
	k := tableKey(ident)
	old, exists := s.tables[k]
	if exists && !req.Overwrite {
		writeError(w, http.StatusConflict, "AlreadyExistsException", "Table already exists: "+strings.Join(ident, "."))
		return
	}
	meta, err := s.readMetadata(r.Context(), req.MetadataLoc)
	if err != nil {
		errBadRequest("read %s: %v", req.MetadataLoc, err).write(w)
		return
	}
	t := &tableEntry{ident: ident, metaLoc: req.MetadataLoc, meta: meta}
	s.tables[k] = t
	if err := s.saveState(); err != nil {
		if exists {
			s.tables[k] = old
		} else {
			delete(s.tables, k)
		}
		errInternal(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.loadResult(t))
}

func (s *Server) loadTable(w http.ResponseWriter, r *http.Request) {
	ident, ok := pathTable(w, r)
	if !ok {
		return
	}
	k := tableKey(ident)
	s.mu.Lock()
	s.loads[k]++
	t := s.tables[k]
	s.mu.Unlock()
	if t == nil {
		errNoSuchTable(ident).write(w)
		return
	}
	// The entry is replaced, never modified, on commit: t is a snapshot.
	writeJSON(w, http.StatusOK, s.loadResult(t))
}

func (s *Server) tableExists(w http.ResponseWriter, r *http.Request) {
	ident, ok := pathTable(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	_, ok = s.tables[tableKey(ident)]
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) dropTable(w http.ResponseWriter, r *http.Request) {
	ident, ok := pathTable(w, r)
	if !ok {
		return
	}
	purge := r.URL.Query().Get("purgeRequested") == "true"
	k := tableKey(ident)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[k]
	if t == nil {
		errNoSuchTable(ident).write(w)
		return
	}
	delete(s.tables, k)
	if err := s.saveState(); err != nil {
		s.tables[k] = t
		errInternal(err).write(w)
		return
	}
	if purge {
		if err := s.purge(r.Context(), t); err != nil {
			errInternal(fmt.Errorf("table dropped, purge failed: %w", err)).write(w)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// purge removes everything under the table's location, if the warehouse's
// io can (RemoveAll), or else the metadata files the table knows of.
func (s *Server) purge(ctx context.Context, t *tableEntry) error {
	fs, err := s.fs(ctx, t.meta.Location(), t.meta.Properties())
	if err != nil {
		return err
	}
	if ra, ok := fs.(icebergio.RemoveAllIO); ok {
		return ra.RemoveAll(t.meta.Location())
	}
	var errs []error
	for e := range t.meta.PreviousFiles() {
		errs = append(errs, fs.Remove(e.MetadataFile))
	}
	errs = append(errs, fs.Remove(t.metaLoc))
	return errors.Join(errs...)
}

func (s *Server) renameTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Source      *restIdent `json:"source"`
		Destination *restIdent `json:"destination"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Source == nil || req.Destination == nil || req.Source.Name == "" || req.Destination.Name == "" {
		errBadRequest("rename needs a source and a destination").write(w)
		return
	}
	from, to := req.Source.ident(), req.Destination.ident()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[tableKey(from)]
	if t == nil {
		errNoSuchTable(from).write(w)
		return
	}
	if _, ok := s.namespaces[nsKey(req.Destination.Namespace)]; !ok {
		errNoSuchNamespace(req.Destination.Namespace).write(w)
		return
	}
	if _, ok := s.tables[tableKey(to)]; ok {
		writeError(w, http.StatusConflict, "AlreadyExistsException", "Table already exists: "+strings.Join(to, "."))
		return
	}
	moved := &tableEntry{ident: to, metaLoc: t.metaLoc, meta: t.meta}
	delete(s.tables, tableKey(from))
	s.tables[tableKey(to)] = moved
	if err := s.saveState(); err != nil {
		delete(s.tables, tableKey(to))
		s.tables[tableKey(from)] = t
		errInternal(err).write(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// commitRequest is the spec's CommitTableRequest.
type commitRequest struct {
	Identifier   *restIdent         `json:"identifier"`
	Requirements table.Requirements `json:"requirements"`
	Updates      table.Updates      `json:"updates"`
}

// stage validates a commit's requirements against base (nil for a table
// that does not exist) and applies its updates, returning the new entry
// with the location its metadata file will have. Nothing is written.
func stage(ident []string, base *tableEntry, reqs table.Requirements, updates table.Updates) (*tableEntry, *apiError) {
	var (
		cur      table.Metadata
		curLoc   string
		baseMeta table.Metadata
		version  int
	)
	if base != nil {
		cur, curLoc, baseMeta = base.meta, base.metaLoc, base.meta
		if v := parseMetadataVersion(curLoc); v >= 0 {
			version = v + 1
		} else {
			version = len(slices.Collect(cur.PreviousFiles())) + 1
		}
	} else {
		if !slices.ContainsFunc(reqs, func(r table.Requirement) bool { return r.GetType() == "assert-create" }) {
			return nil, errNoSuchTable(ident)
		}
		var err error
		// As iceberg-go's own catalogs create through a commit: an empty
		// base that the updates fill in.
		if baseMeta, err = table.NewMetadata(iceberg.NewSchema(0), nil, table.UnsortedSortOrder, "", nil); err != nil {
			return nil, errInternal(err)
		}
	}
	for _, req := range reqs {
		if err := req.Validate(cur); err != nil {
			return nil, &apiError{http.StatusConflict, "CommitFailedException",
				fmt.Sprintf("Commit failed for %s: requirement %s: %v", strings.Join(ident, "."), req.GetType(), err)}
		}
	}
	meta, err := table.UpdateTableMetadata(baseMeta, updates, curLoc)
	if err != nil {
		return nil, &apiError{http.StatusBadRequest, "ValidationException",
			fmt.Sprintf("Cannot apply updates to %s: %v", strings.Join(ident, "."), err)}
	}
	if meta.Location() == "" {
		return nil, errBadRequest("table %s has no location", strings.Join(ident, "."))
	}
	loc, err := newMetadataLocation(meta, version)
	if err != nil {
		return nil, errBadRequest("%v", err)
	}
	return &tableEntry{ident: ident, metaLoc: loc, meta: meta}, nil
}

// faultError is the answer for a fault that fires before the commit.
func faultError(f Fault, ident []string) *apiError {
	name := strings.Join(ident, ".")
	switch f {
	case Conflict:
		return &apiError{http.StatusConflict, "CommitFailedException",
			"Commit failed for " + name + ": the table was changed by another writer (injected)"}
	case ServerError:
		return &apiError{http.StatusInternalServerError, "InternalServerError", "injected server error committing " + name}
	case Unavailable:
		return &apiError{http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: service unavailable committing " + name}
	case GatewayTimeout:
		return &apiError{http.StatusGatewayTimeout, "CommitStateUnknownException", "injected: gateway timeout committing " + name}
	}
	return nil
}

// answerAfterCommit answers for a fault that fires after the swap; false
// if f is not one.
func answerAfterCommit(w http.ResponseWriter, f Fault) bool {
	switch f {
	case UnavailableAfterCommit:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "injected: service unavailable after commit")
		return true
	case CutAfterCommit:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return true
			}
		}
		// No hijacking (HTTP/2): abort the response.
		panic(http.ErrAbortHandler)
	}
	return false
}

func (s *Server) commitTable(w http.ResponseWriter, r *http.Request) {
	ident, ok := pathTable(w, r)
	if !ok {
		return
	}
	var req commitRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Identifier != nil && !slices.Equal(req.Identifier.ident(), ident) {
		errBadRequest("identifier %v in the body does not match the path %v", req.Identifier.ident(), ident).write(w)
		return
	}
	k := tableKey(ident)
	s.mu.Lock()
	s.attempts[k]++
	f := s.nextFault(k)
	if e := faultError(f, ident); e != nil {
		s.mu.Unlock()
		e.write(w)
		return
	}
	next, e := s.commitLocked(r.Context(), []*tableEntry{s.tables[k]}, []commitRequest{req}, [][]string{ident})
	s.mu.Unlock()
	if e != nil {
		e.write(w)
		return
	}
	s.committed(next)
	if answerAfterCommit(w, f) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": next[0].metaLoc, "metadata": next[0].meta})
}

// commitLocked stages every change (each seeing the ones before it on the
// same table), writes the new metadata files and swaps every pointer, or
// changes nothing. mu is held.
func (s *Server) commitLocked(ctx context.Context, bases []*tableEntry, reqs []commitRequest, idents [][]string) ([]*tableEntry, *apiError) {
	staged := map[string]*tableEntry{}
	order := []string{}
	for i, req := range reqs {
		k := tableKey(idents[i])
		base, ok := staged[k]
		if !ok {
			base = bases[i]
			order = append(order, k)
		}
		if ns := idents[i][:len(idents[i])-1]; base == nil && s.namespaces[nsKey(ns)] == nil {
			return nil, errNoSuchNamespace(ns)
		}
		next, e := stage(idents[i], base, req.Requirements, req.Updates)
		if e != nil {
			return nil, e
		}
		staged[k] = next
	}
	for _, k := range order {
		t := staged[k]
		if err := s.writeMetadata(ctx, t.meta, t.metaLoc); err != nil {
			return nil, errInternal(fmt.Errorf("write metadata of %s: %w", strings.Join(t.ident, "."), err))
		}
	}
	old := map[string]*tableEntry{}
	for _, k := range order {
		old[k] = s.tables[k]
		s.tables[k] = staged[k]
	}
	if err := s.saveState(); err != nil {
		for k, t := range old {
			if t == nil {
				delete(s.tables, k)
			} else {
				s.tables[k] = t
			}
		}
		return nil, errInternal(err)
	}
	out := make([]*tableEntry, len(order))
	for i, k := range order {
		s.commits[k]++
		out[i] = staged[k]
	}
	return out, nil
}

func (s *Server) commitTransaction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TableChanges []commitRequest `json:"table-changes"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.TableChanges) == 0 {
		errBadRequest("a transaction needs table-changes").write(w)
		return
	}
	idents := make([][]string, len(req.TableChanges))
	for i, c := range req.TableChanges {
		if c.Identifier == nil || c.Identifier.Name == "" {
			errBadRequest("table-changes[%d] has no identifier", i).write(w)
			return
		}
		idents[i] = c.Identifier.ident()
	}
	s.mu.Lock()
	var f Fault
	var failed []string
	bases := make([]*tableEntry, len(idents))
	for i, id := range idents {
		k := tableKey(id)
		s.attempts[k]++
		bases[i] = s.tables[k]
		if f == 0 {
			f, failed = s.nextFault(k), id
		}
	}
	if e := faultError(f, failed); e != nil {
		s.mu.Unlock()
		e.write(w)
		return
	}
	next, e := s.commitLocked(r.Context(), bases, req.TableChanges, idents)
	s.mu.Unlock()
	if e != nil {
		e.write(w)
		return
	}
	s.committed(next)
	if answerAfterCommit(w, f) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fs opens the warehouse io for location.
func (s *Server) fs(ctx context.Context, location string, tableProps iceberg.Properties) (icebergio.IO, error) {
	props := iceberg.Properties{}
	for k, v := range s.opts.IOProps {
		props[k] = v
	}
	for k, v := range tableProps {
		props[k] = v
	}
	return icebergio.LoadFS(ctx, props, location)
}

// writeMetadata writes meta to loc, compressed as the table's
// write.metadata.compression-codec says (as iceberg-go's catalogs do).
func (s *Server) writeMetadata(ctx context.Context, meta table.Metadata, loc string) error {
	fs, err := s.fs(ctx, loc, meta.Properties())
	if err != nil {
		return err
	}
	wfs, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("io for %s cannot write", loc)
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	switch c := meta.Properties().Get(table.MetadataCompressionKey, table.MetadataCompressionDefault); c {
	case table.MetadataCompressionCodecNone:
		buf.Write(js)
	case table.MetadataCompressionCodecGzip:
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(js)
		if err := zw.Close(); err != nil {
			return err
		}
	case table.MetadataCompressionCodecZstd:
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			return err
		}
		_, _ = zw.Write(js)
		if err := zw.Close(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported %s %q", table.MetadataCompressionKey, c)
	}
	return wfs.WriteFile(loc, buf.Bytes())
}

// readMetadata reads a metadata file through io.
func (s *Server) readMetadata(ctx context.Context, loc string) (table.Metadata, error) {
	t, err := table.NewFromLocation(ctx, nil, loc, func(ctx context.Context) (icebergio.IO, error) {
		return s.fs(ctx, loc, nil)
	}, nil)
	if err != nil {
		return nil, err
	}
	return t.Metadata(), nil
}

func newMetadataLocation(meta table.Metadata, version int) (string, error) {
	p, err := table.LoadLocationProvider(meta.Location(), meta.Properties())
	if err != nil {
		return "", err
	}
	return p.NewTableMetadataFileLocation(version)
}

// metadataFileName is <version>-<uuid>[.codec].metadata.json, as iceberg-go
// (and Java) name metadata files.
var metadataFileName = regexp.MustCompile(`^(\d+)-[0-9a-fA-F-]{36}(?:\.\w+)?\.metadata\.json$`)

// parseMetadataVersion is the version in a metadata file's name, or -1.
func parseMetadataVersion(loc string) int {
	m := metadataFileName.FindStringSubmatch(path.Base(loc))
	if m == nil {
		return -1
	}
	v, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return v
}
