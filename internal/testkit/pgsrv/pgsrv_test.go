package pgsrv_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/testkit/pgsrv"
)

// The cluster starts, serves a created database through database/sql, and
// Stop leaves no process and no folder behind.
func TestStartStop(t *testing.T) {
	begin := time.Now()
	s, err := pgsrv.StartCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster start-up (initdb + postgres ready): %v", time.Since(begin).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})

	db := s.Open(t, "postgres")
	if err := s.CreateDatabaseErr("syncd-test"); err != nil { // a name that needs quoting
		t.Fatal(err)
	}
	dbt := s.Open(t, "syncd-test")
	var version, dataDir string
	if err := dbt.QueryRow("SELECT version()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT current_setting('data_directory')").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; data in %s", version, dataDir)
	if !strings.HasPrefix(dataDir, s.Dir) {
		t.Errorf("data directory %s is not under the cluster's folder %s", dataDir, s.Dir)
	}
	// As root the server runs as the postgres user (PostgreSQL refuses
	// root), and its data belongs to that user.
	fi, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if os.Geteuid() == 0 && owner == 0 {
		t.Errorf("running as root, the data directory belongs to root")
	}
	if os.Geteuid() != 0 && owner != uint32(os.Geteuid()) {
		t.Errorf("data directory belongs to uid %d, not to this user %d", owner, os.Geteuid())
	}

	// A wrong password is refused: the cluster is not open to anyone on
	// the machine.
	badDSN := strings.Replace(s.DSN("postgres"), ":"+s.Password+"@", ":wrong@", 1)
	bad, err := sql.Open(pgsrv.Driver, badDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Ping(); err == nil {
		t.Error("a wrong password was accepted")
	} else {
		t.Logf("wrong password: %v", err)
	}
	bad.Close()

	pids := serverPIDs(t, s)
	if len(pids) == 0 {
		t.Fatal("no server process found")
	}
	db.Close()
	dbt.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("server process %d still there after Stop (%v)", pid, err)
		}
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster folder %s still there after Stop (%v)", s.Dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// serverPIDs are the processes whose command line names the cluster's
// folder: the postmaster and its children.
func serverPIDs(t *testing.T, s *pgsrv.Server) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(cmdline), s.Dir) || isChildOfCluster(string(stat), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isChildOfCluster: a backend's command line is rewritten ("postgres:
// checkpointer"), so children are found by their process group, the
// postmaster's pid.
func isChildOfCluster(stat string, s *pgsrv.Server) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(stat[i+1:]) // state ppid pgrp ...
	return len(f) > 2 && f[2] == strconv.Itoa(s.PID())
}

// Without the server, the error names the command that installs it.
func TestMissingServerNamesInstall(t *testing.T) {
	t.Setenv("SYNCD_PG_BINDIR", "")
	if _, err := pgsrv.BinDir(); err != nil {
		t.Fatalf("the server is not installed here: %v", err)
	}
	// A folder without the server: the error names the commands that
	// install it.
	t.Setenv("SYNCD_PG_BINDIR", t.TempDir())
	_, err := pgsrv.StartCluster()
	if err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), pgsrv.InstallCommand) {
		t.Fatalf("StartCluster with an empty SYNCD_PG_BINDIR: %v", err)
	}
	t.Logf("without the server: %v", err)
}
