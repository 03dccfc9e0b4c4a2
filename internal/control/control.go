// Package control is the control endpoint of `syncd run`: how `syncd
// backfill` and `syncd auth login` get their work done by a daemon that
// holds the state, instead of refusing (exit 3) or waiting for a state that
// a daemon never gives back. Start serves it in the daemon; Connect is a
// command's side.
//
// It is a listener on loopback (127.0.0.1, a port the kernel picks), apart
// from server.addr, which other pods may reach; every request must carry
// the token of the control file, which the daemon writes with mode 0600
// beside the state file (<state.path>.control), or, for a state in a bucket,
// in the temporary directory. Only the daemon's user on the same host (or a
// `kubectl exec` into its pod, as that user) can read it. A unix socket
// would need no token, but its path is limited to 107 bytes and some
// volumes cannot hold one; the token file works wherever the state does.
package control

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
)

// Control endpoint paths.
const (
	pathBackfill = "/v1/backfill"
	pathSignIn   = "/v1/signin"
	pathPing     = "/v1/ping"
	pathSignedIn = "/v1/signin/status"
	pathSignOut  = "/v1/signout"
)

// The sources a sign-in request names, as `syncd auth --source` does
// (app's names for them).
const (
	sourceScheduling = app.SignInScheduling
	sourceForms      = app.SignInForms
)

// The exit codes a backfill's outcome (Done.Code) carries: those the
// command alone would have had (README, "Exit codes"), which it exits with.
const (
	CodeOK     = 0
	CodeFailed = 1 // one or more streams failed; the others committed
	CodeUsage  = 2 // a bad request: a range, an account, a form id
)

// Info is the content of the control file.
type Info struct {
	Addr  string `json:"addr"`  // host:port on loopback
	Token string `json:"token"` // the bearer token every request carries
	PID   int    `json:"pid"`
}

// Path is where the daemon of cfg's state writes its control file.
func Path(cfg *config.Config) string {
	if cfg.State.URL == "" {
		return cfg.State.Path + ".control"
	}
	sum := sha256.Sum256([]byte(cfg.State.URL))
	return filepath.Join(os.TempDir(), "syncd-"+hex.EncodeToString(sum[:8])+".control")
}

// Read reads the control file of cfg's state. A file that another user
// owns, or that others may read, is refused: in a shared temporary
// directory it could be planted to have the tokens of a sign-in sent
// elsewhere.
func Read(cfg *config.Config) (Info, error) {
	p := Path(cfg)
	f, err := os.Open(p)
	if err != nil {
		return Info{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Info{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	if err := privateFile(fi); err != nil {
		return Info{}, fmt.Errorf("the daemon's control file %s is not to be trusted (%w): remove it and restart the daemon", p, err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return Info{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	var ci Info
	if err := json.Unmarshal(raw, &ci); err != nil || ci.Addr == "" || ci.Token == "" {
		return Info{}, fmt.Errorf("the daemon's control file %s cannot be read: restart the daemon", p)
	}
	return ci, nil
}

// privateFile checks that fi is a regular file of this process's user that
// no one else may read or write.
func privateFile(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	uid, ok := fileOwner(fi)
	if !ok {
		return nil // no owner nor unix mode to check (Windows: the folder's ACL guards it)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %v: others may read it", perm)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", uid, os.Getuid())
	}
	return nil
}

// writePrivate writes b to path, readable by its owner only, replacing it
// whole (a reader never sees half a file).
func writePrivate(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	return nil
}

// authorized reports whether r carries token (compared in constant time).
func authorized(r *http.Request, token string) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(token)) == 1
}

// requireToken refuses, before anything is read or done, a request without
// the control token, and anything but POST.
func requireToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, token) {
			writeError(w, http.StatusUnauthorized, errors.New("this control endpoint needs the token of the daemon's control file (readable by its user only): nothing was done"))
			return
		}
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, errors.New("use POST"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
