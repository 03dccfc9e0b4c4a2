// Package icebergrest is a test server for the Iceberg REST catalog API
// (the OpenAPI spec in apache/iceberg open-api/rest-catalog-open-api.yaml)
// as far as iceberg-go's REST client (catalog/rest) uses it: the config and
// OAuth2 token endpoints, namespaces (list, create, load, exists, drop,
// update properties), tables (list, create and stage-create, register,
// load, exists, drop, rename, commit) and multi-table transactions.
//
// It behaves as a real catalog where a writer depends on it: a commit's
// requirements are validated against the current metadata with iceberg-go's
// own table.Requirement implementations, its updates are applied with
// table.MetadataBuilder, the new metadata file is written through iceberg-go's
// io (so file://, and with the backends registered by the caller s3://,
// gs:// and abfs:// warehouses work) and the table's metadata pointer is
// swapped atomically under the server's lock. A failed requirement answers
// 409 CommitFailedException, as the spec says. Faults are injected on demand
// (see Fault).
//
// A route the fake does not implement answers 404 with the spec's ErrorModel
// naming the route; Start fails the test at cleanup if any was hit, so that a
// change in what the client calls is noticed rather than faked.
package icebergrest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Options configure a fake.
type Options struct {
	// Warehouse is the warehouse location, e.g. "file:///tmp/wh" or
	// "s3://bucket/wh". A table created without a location goes to
	// <Warehouse>/<namespace levels joined by "/">/<table>, or to
	// <namespace property "location">/<table>. Required.
	Warehouse string
	// WarehouseName, if set, is the only name (besides Warehouse itself)
	// that GET /v1/config accepts in its warehouse parameter, as Polaris
	// and Lakekeeper accept only the catalogs they know; another answers
	// 400. Empty accepts any.
	WarehouseName string
	// Prefix, if set, is advertised in /v1/config's overrides and every
	// catalog route lives under /v1/<Prefix>/. One path segment.
	Prefix string

	// ClientID and ClientSecret are the one OAuth2 client that
	// POST /v1/oauth/tokens accepts (client_credentials grant).
	ClientID, ClientSecret string
	// Token is a static bearer token accepted as well.
	Token string
	// With neither a client nor a token, no request needs a token.

	// TokenExpiresIn is the expires_in of issued tokens, in seconds
	// (default 3600). Tokens do not actually expire: RevokeTokens does that.
	TokenExpiresIn int

	// IOProps are the properties the fake opens the warehouse with
	// (io.LoadFS), e.g. s3.endpoint and credentials. Table properties are
	// added to them per table.
	IOProps iceberg.Properties
	// TableConfig is returned as the config of every load-table and
	// create-table answer (what a real catalog uses to vend credentials).
	TableConfig iceberg.Properties
	// Defaults are returned as /v1/config's defaults.
	Defaults iceberg.Properties

	// StateFile, if set, is where the namespaces and the table -> metadata
	// location map are kept (JSON, rewritten after each change) and read
	// back by New, so a test can restart the fake. Metadata files are read
	// back through io.
	StateFile string
}

// Fault is a failure injected into a later commit (POST
// /v1/namespaces/{ns}/tables/{table} or a transaction naming the table).
type Fault int

const (
	// Conflict answers 409 CommitFailedException; nothing is committed, as
	// when another writer won the race.
	Conflict Fault = iota + 1
	// ServerError answers 500 before committing anything.
	ServerError
	// Unavailable answers 503 before committing anything.
	Unavailable
	// GatewayTimeout answers 504 before committing anything.
	GatewayTimeout
	// UnavailableAfterCommit commits (the metadata pointer is swapped),
	// then answers 503: the client cannot tell whether it committed.
	UnavailableAfterCommit
	// CutAfterCommit commits, then closes the connection without an
	// answer.
	CutAfterCommit
)

func (f Fault) String() string {
	switch f {
	case Conflict:
		return "Conflict"
	case ServerError:
		return "ServerError"
	case Unavailable:
		return "Unavailable"
	case GatewayTimeout:
		return "GatewayTimeout"
	case UnavailableAfterCommit:
		return "UnavailableAfterCommit"
	case CutAfterCommit:
		return "CutAfterCommit"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// afterCommit reports whether the fault fires after the swap.
func (f Fault) afterCommit() bool { return f == UnavailableAfterCommit || f == CutAfterCommit }

// Server is a fake REST catalog; it is an http.Handler. Its methods are
// safe for concurrent use.
type Server struct {
	opts Options
	base string // "/v1" or "/v1/<prefix>"
	mux  *http.ServeMux
	url  string

	mu         sync.Mutex
	namespaces map[string]iceberg.Properties // nsKey -> properties
	tables     map[string]*tableEntry        // tableKey -> table
	tokens     map[string]bool               // issued and not revoked
	faults     map[string][]Fault            // tableKey, or "" for any table
	commits    map[string]int                // tableKey -> successful commits
	attempts   map[string]int                // tableKey -> commit requests
	loads      map[string]int                // tableKey -> load-table requests
	tokenReqs  int
	unknown    []string // "METHOD path" of unknown routes hit
	onCommit   func(ident []string, metadataLocation string)
}

type tableEntry struct {
	ident   table.Identifier
	metaLoc string
	meta    table.Metadata
}

// nsKey and tableKey join identifier levels with the spec's namespace
// separator (0x1F), which no level may contain.
func nsKey(ns []string) string { return strings.Join(ns, "\x1f") }

func tableKey(ident []string) string { return nsKey(ident) }

// New builds a fake from opts (reading Options.StateFile if it exists).
func New(opts Options) (*Server, error) {
	if opts.Warehouse == "" {
		return nil, fmt.Errorf("icebergrest: Options.Warehouse is required")
	}
	if strings.Contains(opts.Prefix, "/") {
		return nil, fmt.Errorf("icebergrest: prefix %q has a slash", opts.Prefix)
	}
	if opts.TokenExpiresIn == 0 {
		opts.TokenExpiresIn = 3600
	}
	s := &Server{
		opts:       opts,
		base:       "/v1",
		namespaces: map[string]iceberg.Properties{},
		tables:     map[string]*tableEntry{},
		tokens:     map[string]bool{},
		faults:     map[string][]Fault{},
		commits:    map[string]int{},
		attempts:   map[string]int{},
		loads:      map[string]int{},
	}
	if opts.Prefix != "" {
		s.base += "/" + opts.Prefix
	}
	if err := s.loadState(); err != nil {
		return nil, err
	}
	s.mux = s.routes()
	return s, nil
}

// Start runs a fake on a loopback httptest server, closed when the test
// ends; it fails the test if New fails or, at cleanup, if a route the fake
// does not implement was called.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatalf("icebergrest: %v", err)
	}
	srv := httptest.NewServer(s)
	s.url = srv.URL
	tb.Cleanup(func() {
		srv.Close()
		if u := s.UnknownRoutes(); len(u) > 0 {
			tb.Errorf("icebergrest: the client called routes the fake does not implement: %v", u)
		}
	})
	return s
}

// URL is the base URL of a fake run by Start (the catalog's "uri").
func (s *Server) URL() string { return s.url }

// Credential is the "credential" property for the configured client.
func (s *Server) Credential() string { return s.opts.ClientID + ":" + s.opts.ClientSecret }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.base+"/oauth/tokens" && r.URL.Path != "/v1/oauth/tokens" && !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "NotAuthorizedException", "missing or invalid bearer token")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	b := s.base
	mux.HandleFunc("GET /v1/config", s.getConfig)
	mux.HandleFunc("POST /v1/oauth/tokens", s.token)
	if b != "/v1" {
		mux.HandleFunc("POST "+b+"/oauth/tokens", s.token)
	}

	mux.HandleFunc("GET "+b+"/namespaces", s.listNamespaces)
	mux.HandleFunc("POST "+b+"/namespaces", s.createNamespace)
	mux.HandleFunc("GET "+b+"/namespaces/{ns}", s.loadNamespace)
	mux.HandleFunc("HEAD "+b+"/namespaces/{ns}", s.namespaceExists)
	mux.HandleFunc("DELETE "+b+"/namespaces/{ns}", s.dropNamespace)
	mux.HandleFunc("POST "+b+"/namespaces/{ns}/properties", s.updateNamespace)

	mux.HandleFunc("GET "+b+"/namespaces/{ns}/tables", s.listTables)
	mux.HandleFunc("POST "+b+"/namespaces/{ns}/tables", s.createTable)
	mux.HandleFunc("POST "+b+"/namespaces/{ns}/register", s.registerTable)
	mux.HandleFunc("GET "+b+"/namespaces/{ns}/tables/{table}", s.loadTable)
	mux.HandleFunc("HEAD "+b+"/namespaces/{ns}/tables/{table}", s.tableExists)
	mux.HandleFunc("POST "+b+"/namespaces/{ns}/tables/{table}", s.commitTable)
	mux.HandleFunc("DELETE "+b+"/namespaces/{ns}/tables/{table}", s.dropTable)
	mux.HandleFunc("POST "+b+"/tables/rename", s.renameTable)
	mux.HandleFunc("POST "+b+"/transactions/commit", s.commitTransaction)

	// Views and functions are part of the spec but not of this fake.
	unsupported := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotAcceptable, "UnsupportedOperationException",
			fmt.Sprintf("icebergrest does not implement %s %s", r.Method, r.URL.Path))
	}
	mux.HandleFunc(b+"/namespaces/{ns}/views", unsupported)
	mux.HandleFunc(b+"/namespaces/{ns}/views/{view}", unsupported)
	mux.HandleFunc(b+"/namespaces/{ns}/register-view", unsupported)
	mux.HandleFunc(b+"/views/rename", unsupported)
	mux.HandleFunc(b+"/namespaces/{ns}/functions", unsupported)
	mux.HandleFunc(b+"/namespaces/{ns}/functions/{function}", unsupported)

	mux.HandleFunc("/", s.unknownRoute)
	return mux
}

// endpoints is what /v1/config advertises ("METHOD /v1/{prefix}/..."):
// what routes implements, HEAD included, views and metrics not.
var endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/register",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/transactions/commit",
}

func (s *Server) unknownRoute(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.unknown = append(s.unknown, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	writeError(w, http.StatusNotFound, "NoSuchRouteException",
		fmt.Sprintf("icebergrest: no route %s %s (catalog routes are under %s)", r.Method, r.URL.Path, s.base))
}

// UnknownRoutes lists the "METHOD path" of requests to routes the fake does
// not implement, in order.
func (s *Server) UnknownRoutes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unknown...)
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	if wh := r.URL.Query().Get("warehouse"); wh != "" && s.opts.WarehouseName != "" &&
		wh != s.opts.WarehouseName && wh != s.opts.Warehouse {
		writeError(w, http.StatusBadRequest, "BadRequestException", fmt.Sprintf("unknown warehouse %q", wh))
		return
	}
	defaults := iceberg.Properties{}
	for k, v := range s.opts.Defaults {
		defaults[k] = v
	}
	overrides := iceberg.Properties{"warehouse": s.opts.Warehouse}
	if s.opts.Prefix != "" {
		overrides["prefix"] = s.opts.Prefix
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"defaults":  defaults,
		"overrides": overrides,
		"endpoints": endpoints,
	})
}

// authRequired reports whether requests need a bearer token.
func (s *Server) authRequired() bool { return s.opts.ClientID != "" || s.opts.Token != "" }

func (s *Server) authorized(r *http.Request) bool {
	if !s.authRequired() {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	if s.opts.Token != "" && tok == s.opts.Token {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[tok]
}

// token is the OAuth2 token endpoint (RFC 6749 client credentials, as the
// spec's /v1/oauth/tokens): client_id and client_secret in the form or in
// HTTP Basic auth. Errors follow the spec's OAuthError.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.tokenReqs++
	s.mu.Unlock()
	oauthErr := func(status int, code, desc string) {
		writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		oauthErr(http.StatusBadRequest, "invalid_request", "malformed form body")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthErr(http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q is not supported", gt))
		return
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if bid, bsecret, ok := r.BasicAuth(); ok {
		id, secret = bid, bsecret
	}
	if s.opts.ClientID == "" || id != s.opts.ClientID || secret != s.opts.ClientSecret {
		oauthErr(http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "icebergrest-" + hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = true
	s.mu.Unlock()
	scope := r.PostForm.Get("scope")
	if scope == "" {
		scope = "catalog"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":      tok,
		"token_type":        "bearer",
		"expires_in":        s.opts.TokenExpiresIn,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"scope":             scope,
	})
}

// RevokeTokens forgets every issued token: later requests carrying one
// answer 401. The static Options.Token stays valid.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]bool{}
}

// TokenRequests counts requests to the token endpoint.
func (s *Server) TokenRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenReqs
}

// InjectCommitFaults queues faults for later commits to the table ident
// (namespace levels then name), one per commit, in order. A nil ident
// queues them for any table; a table's own queue is used first.
func (s *Server) InjectCommitFaults(ident []string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ""
	if ident != nil {
		k = tableKey(ident)
	}
	s.faults[k] = append(s.faults[k], faults...)
}

// PendingFaults is how many injected faults have not fired yet.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.faults {
		n += len(q)
	}
	return n
}

// nextFault pops the next fault for the table; mu is held.
func (s *Server) nextFault(k string) Fault {
	for _, q := range []string{k, ""} {
		if f := s.faults[q]; len(f) > 0 {
			s.faults[q] = f[1:]
			return f[0]
		}
	}
	return 0
}

// OnCommit sets a function called after each commit swapped a table's
// metadata pointer and before the commit is answered (once per table of a
// transaction): a test kills its client there to stop it between the
// catalog's commit and its own checkpoint. It runs without the server's
// lock, in the handler's goroutine.
func (s *Server) OnCommit(fn func(ident []string, metadataLocation string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCommit = fn
}

// committed calls the OnCommit function for each entry.
func (s *Server) committed(ts []*tableEntry) {
	s.mu.Lock()
	fn := s.onCommit
	s.mu.Unlock()
	if fn == nil {
		return
	}
	for _, t := range ts {
		fn(slices.Clone(t.ident), t.metaLoc)
	}
}

// Commits counts the commits that swapped the table's metadata (a plain
// create not included, a staged create's commit and a commit a fault after
// the swap hid from the client included).
func (s *Server) Commits(ident ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits[tableKey(ident)]
}

// CommitRequests counts the commit requests for the table, failed ones
// included.
func (s *Server) CommitRequests(ident ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[tableKey(ident)]
}

// Loads counts the load-table requests for the table.
func (s *Server) Loads(ident ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[tableKey(ident)]
}

// MetadataLocation is the table's current metadata file.
func (s *Server) MetadataLocation(ident ...string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[tableKey(ident)]
	if t == nil {
		return "", false
	}
	return t.metaLoc, true
}

// Metadata is the table's current metadata (immutable; do not modify).
func (s *Server) Metadata(ident ...string) (table.Metadata, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[tableKey(ident)]
	if t == nil {
		return nil, false
	}
	return t.meta, true
}

// Tables lists every table, each as namespace levels then name, sorted.
func (s *Server) Tables() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.tables))
	for k := range s.tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = append([]string(nil), s.tables[k].ident...)
	}
	return out
}

// errorModel is the spec's ErrorModel, wrapped as IcebergErrorResponse.
type errorModel struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Code    int      `json:"code"`
	Stack   []string `json:"stack,omitempty"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]errorModel{"error": {Message: msg, Type: typ, Code: status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]errorModel{"error": {
			Message: "icebergrest: encode answer: " + err.Error(), Type: "InternalServerError", Code: status,
		}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decodeBody reads a JSON request body into v, answering 400 if it cannot.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", "malformed request body: "+err.Error())
		return false
	}
	return true
}
