// Package pgsrv starts throwaway PostgreSQL servers for tests: a cluster
// that initdb makes in a temporary folder, served by Debian's postgres on a
// loopback port with a generated password, and removed when the test ends.
// The Iceberg SQL catalog keeps its tables (iceberg_tables,
// iceberg_namespace_properties) in such a database, as Spark's, Trino's
// and PyIceberg's JDBC/SQL catalogs do.
//
// The server is Debian's postgresql package (PostgreSQL 15 on Debian 12),
// which `make tools` installs with apt-get when it is missing (.ci/run as
// root); a missing server fails the test with the command that installs it,
// never skips it. PostgreSQL refuses to run as root, and the tests run as
// root in CI: then initdb and postgres run as the package's `postgres` user
// (set as the child's credentials, no su or runuser in between), and the
// cluster's folder belongs to that user.
//
// Importing the package registers the database/sql driver "pgx"
// (github.com/jackc/pgx/v5/stdlib), the driver the DSNs are meant for.
// It imports nothing of syncd but internal/testkit/procs.
package pgsrv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/syncd-dev/syncd/internal/testkit/procs"
)

// Driver is the database/sql driver name the DSNs are for: pgx's stdlib
// adapter, which this package registers.
const Driver = "pgx"

// Superuser is the cluster's superuser, whatever the OS user running it.
const Superuser = "postgres"

// InstallCommand installs the server on Debian as root; `make tools` runs it
// when the server is missing.
const InstallCommand = "apt-get update && apt-get install -y --no-install-recommends postgresql"

// Server is a running throwaway PostgreSQL cluster.
type Server struct {
	Host     string // 127.0.0.1
	Port     int
	Password string // of Superuser, generated per cluster
	Dir      string // the cluster's folder (data and socket), removed by Stop

	cmd      *exec.Cmd
	exited   chan struct{}
	out      *logBuffer
	stopOnce sync.Once
	stopErr  error
}

// Start starts a cluster for the test and stops it, removing its folder, at
// cleanup (also when the test fails). Without the server installed the test
// fails naming the command that installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	begin := time.Now()
	s, err := StartCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgsrv: %v", err)
		}
	})
	t.Logf("pgsrv: PostgreSQL on %s:%d ready in %v", s.Host, s.Port, time.Since(begin).Round(time.Millisecond))
	return s
}

// StartCluster starts a cluster without a testing.TB, for a TestMain or a
// long-running chaos test that owns its lifetime: the caller must call Stop
// (deferred or on its way out). On error nothing is left running.
func StartCluster() (*Server, error) {
	bindir, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, owner, err := serverCredential()
	if err != nil {
		return nil, err
	}
	sweepStale()
	// Not t.TempDir: its parent folders are private to the test's user, and
	// the postgres user must reach the cluster's folder. The system temp
	// folder (/tmp, sticky and world-writable) is reachable.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", Dir: dir, out: &logBuffer{}, exited: make(chan struct{})}
	if err := s.start(bindir, cred, owner); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start(bindir string, cred *syscall.Credential, owner *user.User) error {
	data, sock := filepath.Join(s.Dir, "data"), filepath.Join(s.Dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return err
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return err
	}
	s.Password = hex.EncodeToString(pw) // hex: nothing to escape in a URL
	pwfile := filepath.Join(s.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return err
	}
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		for _, p := range []string{s.Dir, sock, pwfile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("pgsrv: chown %s to the postgres user: %w", p, err)
			}
		}
	}

	// initdb: a password for every connection (scram), so other users of
	// the machine cannot use the cluster; no fsync and no locale, which
	// initdb would otherwise spend most of its time on.
	initdb := exec.Command(filepath.Join(bindir, "initdb"), "-D", data, "-U", Superuser,
		"--pwfile="+pwfile, "--auth=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgsrv: initdb: %v\n%s", err, out)
	}
	os.Remove(pwfile)

	// The port comes from the kernel just before postgres binds it; another
	// process can take it meanwhile, and then postgres exits: try again.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.Port = port
		s.out.Reset()
		s.exited = make(chan struct{})
		cmd := exec.Command(filepath.Join(bindir, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock,
			"-c", "listen_addresses="+s.Host,
			// Throwaway data: durability off for speed, small memory.
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=16MB", "-c", "max_connections=50",
			// Shared memory in files under the cluster's folder, not
			// /dev/shm, so that a killed test leaves nothing outside it.
			"-c", "dynamic_shared_memory_type=mmap",
			"-c", "logging_collector=off", "-c", "log_min_messages=warning")
		cmd.Env = serverEnv()
		cmd.Stdout, cmd.Stderr = s.out, s.out
		// Own process group, so Stop can kill backends too; SIGKILL when
		// the test process dies before its cleanup runs.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("pgsrv: start postgres: %w", err)
		}
		s.cmd = cmd
		exited := s.exited
		go func() { _ = cmd.Wait(); close(exited) }()
		if lastErr = s.waitReady(60 * time.Second); lastErr == nil {
			return nil
		}
		s.kill()
		os.Remove(filepath.Join(data, "postmaster.pid")) // or sweepStale elsewhere could take the folder
		if !strings.Contains(s.out.String(), "could not bind") && !strings.Contains(s.out.String(), "already in use") {
			break
		}
	}
	return lastErr
}

// waitReady waits until the server answers a query or exits.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.DSN(Superuser))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgsrv: postgres exited: %s", s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgsrv: postgres not answering on %s:%d after %v (%v): %s", s.Host, s.Port, timeout, err, s.out.String())
		}
	}
}

// DSN is the URL that connects to database db as Superuser over TCP, for
// database/sql's "pgx" driver (and pgx, psql and libpq alike).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", Superuser, s.Password, s.Host, s.Port, url.PathEscape(db))
}

// CreateDatabase creates database name and returns its DSN.
func (s *Server) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	if err := s.CreateDatabaseErr(name); err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}

// CreateDatabaseErr is CreateDatabase without a testing.TB.
func (s *Server) CreateDatabaseErr(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN(Superuser))
	if err != nil {
		return fmt.Errorf("pgsrv: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("pgsrv: create database %q: %w", name, err)
	}
	return nil
}

// Open opens database db with database/sql and closes it at cleanup.
func (s *Server) Open(t testing.TB, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open(Driver, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// PID is the postmaster's process id (also its process group's).
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log is what the server printed so far (warnings and errors), for failure
// messages.
func (s *Server) Log() string { return s.out.String() }

// Stop shuts the server down (fast shutdown: clients are disconnected),
// kills what is left after 10 seconds, and removes the cluster's folder.
// It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.exited:
			case <-time.After(10 * time.Second):
				s.stopErr = fmt.Errorf("postgres did not shut down in 10s, killed: %s", s.out.String())
				s.kill()
			}
			// Backends exit with the postmaster; kill any straggler.
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		if err := os.RemoveAll(s.Dir); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// kill kills the server's process group and waits for the postmaster.
func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// dirPrefix names the clusters' folders in the system temp folder.
const dirPrefix = "syncd-pg-"

// sweepStale removes the folders of clusters whose test process died
// before its cleanup (a test binary's timeout panics past every cleanup):
// their postmaster was killed with it (Pdeathsig) and left postmaster.pid
// naming a process that no longer exists. A folder without postmaster.pid
// may be a cluster another process is making right now: removed only when
// an hour old.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		pidfile, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err != nil {
			if os.IsNotExist(err) && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(d)
			}
			continue
		}
		first, _, _ := strings.Cut(string(pidfile), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// BinDir is the folder of initdb and postgres: $SYNCD_PG_BINDIR if set,
// else the newest /usr/lib/postgresql/N/bin (Debian's layout; initdb and
// postgres are not on PATH there), else the folder of a postgres on PATH.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if d := os.Getenv("SYNCD_PG_BINDIR"); d != "" {
		dirs = []string{d}
	}
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil && os.Getenv("SYNCD_PG_BINDIR") == "" {
		if p, err = filepath.EvalSymlinks(p); err == nil && isExec(filepath.Join(filepath.Dir(p), "initdb")) {
			return filepath.Dir(p), nil
		}
	}
	return "", fmt.Errorf("pgsrv: the PostgreSQL server (initdb, postgres) is not installed: run `make tools` in %s as root, "+
		"which runs `%s` (or run that yourself as root), or set SYNCD_PG_BINDIR to the folder of initdb and postgres", procs.RepoRoot(), InstallCommand)
}

func pgVersion(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential is who runs initdb and postgres: this process's user,
// unless that is root, which PostgreSQL refuses; then the postgres user
// that Debian's package creates.
func serverCredential() (*syscall.Credential, *user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, fmt.Errorf("pgsrv: running as root, PostgreSQL must run as another user, and there is no postgres user (%v): "+
			"install Debian's server, which creates it: %s", err, InstallCommand)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, fmt.Errorf("pgsrv: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, u, nil
}

// serverEnv is the servers' environment: none of the test's variables
// (PG* ones would change what initdb does), a C locale.
func serverEnv() []string {
	return []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "LANG=C", "TZ=UTC"}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// logBuffer keeps the first MiB the server prints.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}
