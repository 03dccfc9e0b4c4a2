package icebergrest

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
)

// pathNamespace is the {ns} path parameter split at the spec's separator
// (0x1F, sent as %1F); false (and a 400 written) if it is empty.
func pathNamespace(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	ns := strings.Split(r.PathValue("ns"), "\x1f")
	for _, l := range ns {
		if l == "" {
			writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("invalid namespace %q", r.PathValue("ns")))
			return nil, false
		}
	}
	return ns, true
}

func noSuchNamespace(w http.ResponseWriter, ns []string) {
	writeError(w, http.StatusNotFound, "NoSuchNamespaceException",
		fmt.Sprintf("Namespace does not exist: %s", strings.Join(ns, ".")))
}

// page cuts a sorted list by the pageToken (an offset) and pageSize query
// parameters, returning the next page token ("" on the last page).
func page[T any](w http.ResponseWriter, r *http.Request, all []T) ([]T, string, bool) {
	q := r.URL.Query()
	start := 0
	if t := q.Get("pageToken"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(all) {
			writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("invalid pageToken %q", t))
			return nil, "", false
		}
		start = n
	}
	end := len(all)
	if ps := q.Get("pageSize"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("invalid pageSize %q", ps))
			return nil, "", false
		}
		end = min(end, start+n)
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, true
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	var parent []string
	if p := r.URL.Query().Get("parent"); p != "" {
		parent = strings.Split(p, "\x1f")
	}
	s.mu.Lock()
	if parent != nil {
		if _, ok := s.namespaces[nsKey(parent)]; !ok {
			s.mu.Unlock()
			noSuchNamespace(w, parent)
			return
		}
	}
	var keys []string
	for k := range s.namespaces {
		ns := strings.Split(k, "\x1f")
		if len(ns) == len(parent)+1 && slices.Equal(ns[:len(parent)], parent) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	sort.Strings(keys)
	keys, next, ok := page(w, r, keys)
	if !ok {
		return
	}
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = strings.Split(k, "\x1f")
	}
	rsp := map[string]any{"namespaces": out}
	if next != "" {
		rsp["next-page-token"] = next
	}
	writeJSON(w, http.StatusOK, rsp)
}

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  []string           `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Namespace) == 0 || slices.Contains(req.Namespace, "") {
		writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("invalid namespace %q", req.Namespace))
		return
	}
	for _, l := range req.Namespace {
		if strings.Contains(l, "\x1f") {
			writeError(w, http.StatusBadRequest, "BadRequestException", "a namespace level cannot contain 0x1F")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsKey(req.Namespace)
	if _, ok := s.namespaces[k]; ok {
		writeError(w, http.StatusConflict, "AlreadyExistsException",
			fmt.Sprintf("Namespace already exists: %s", strings.Join(req.Namespace, ".")))
		return
	}
	if p := req.Namespace[:len(req.Namespace)-1]; len(p) > 0 {
		if _, ok := s.namespaces[nsKey(p)]; !ok {
			noSuchNamespace(w, p)
			return
		}
	}
	props := iceberg.Properties{}
	for k, v := range req.Properties {
		props[k] = v
	}
	s.namespaces[k] = props
	if err := s.saveState(); err != nil {
		delete(s.namespaces, k)
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": props})
}

func (s *Server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	props, ok := s.namespaces[nsKey(ns)]
	cp := iceberg.Properties{}
	for k, v := range props {
		cp[k] = v
	}
	s.mu.Unlock()
	if !ok {
		noSuchNamespace(w, ns)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": cp})
}

func (s *Server) namespaceExists(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	_, ok = s.namespaces[nsKey(ns)]
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) dropNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsKey(ns)
	props, ok := s.namespaces[k]
	if !ok {
		noSuchNamespace(w, ns)
		return
	}
	for other := range s.namespaces {
		if strings.HasPrefix(other, k+"\x1f") {
			writeError(w, http.StatusConflict, "NamespaceNotEmptyException",
				fmt.Sprintf("Namespace %s is not empty: it has namespace %s", strings.Join(ns, "."), strings.ReplaceAll(other, "\x1f", ".")))
			return
		}
	}
	for _, t := range s.tables {
		if slices.Equal(t.ident[:len(t.ident)-1], ns) {
			writeError(w, http.StatusConflict, "NamespaceNotEmptyException",
				fmt.Sprintf("Namespace %s is not empty: it has table %s", strings.Join(ns, "."), strings.Join(t.ident, ".")))
			return
		}
	}
	delete(s.namespaces, k)
	if err := s.saveState(); err != nil {
		s.namespaces[k] = props
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) updateNamespace(w http.ResponseWriter, r *http.Request) {
	ns, ok := pathNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Removals []string           `json:"removals"`
		Updates  iceberg.Properties `json:"updates"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	for _, k := range req.Removals {
		if _, ok := req.Updates[k]; ok {
			writeError(w, http.StatusUnprocessableEntity, "UnprocessableEntityException",
				fmt.Sprintf("property %q is both removed and updated", k))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := nsKey(ns)
	old, ok := s.namespaces[k]
	if !ok {
		noSuchNamespace(w, ns)
		return
	}
	props := iceberg.Properties{}
	for k, v := range old {
		props[k] = v
	}
	removed, updated, missing := []string{}, []string{}, []string{}
	for _, p := range req.Removals {
		if _, ok := props[p]; ok {
			delete(props, p)
			removed = append(removed, p)
		} else {
			missing = append(missing, p)
		}
	}
	for p, v := range req.Updates {
		props[p] = v
		updated = append(updated, p)
	}
	sort.Strings(updated)
	s.namespaces[k] = props
	if err := s.saveState(); err != nil {
		s.namespaces[k] = old
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string][]string{"removed": removed, "updated": updated, "missing": missing})
}

func splitKey(k string) []string { return strings.Split(k, "\x1f") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
