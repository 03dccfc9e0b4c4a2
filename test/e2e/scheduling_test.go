package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	"github.com/syncd-dev/syncd/internal/schedsim"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/testkit"
)

// schedEnv is a Forms API simulator, a scheduling API simulator and a
// syncd installation configured for both.
type schedEnv struct {
	forms  *testkit.Sim
	sched  *schedsim.Server
	base   string
	w      *testkit.Workdir
	secret string // the scheduling client secret, passed in the environment
	env    []string
}

// schedOptions vary a test's scheduling section.
type schedOptions struct {
	sim        schedsim.Config
	clientID   string
	secret     string // client_secret; the sim client's first when empty
	secretNext string
	scopes     string // YAML list; default the config's default
	wrap       func(http.Handler) http.Handler
	sync       string // lines under sync: (default safety_lag: 0s)
	extra      string // top-level sections appended (server:)
}

func startSched(t *testing.T, o schedOptions) *schedEnv {
	t.Helper()
	start, end := history(3)
	e := &schedEnv{forms: testkit.StartSim(t, formsim.Config{Seed: 61, Forms: 1, Submissions: 80, Start: start, End: end})}
	if o.sim.Seed == 0 {
		o.sim.Seed = 7
	}
	e.sched = schedsim.New(o.sim)
	var h http.Handler = e.sched
	if o.wrap != nil {
		h = o.wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e.base = ts.URL
	if o.clientID == "" {
		o.clientID = "sim-client"
	}
	if o.secret == "" {
		for _, c := range e.sched.Clients() {
			if c.ID == o.clientID && len(c.Secrets) > 0 {
				o.secret = c.Secrets[0]
			}
		}
	}
	e.secret = o.secret
	e.env = []string{"SCHED_SECRET=" + o.secret, "SCHED_SECRET_NEXT=" + o.secretNext}
	section := fmt.Sprintf("scheduling:\n  base_url: %s\n  authorize_url: %s%s\n  client_id: %s\n  client_secret: ${SCHED_SECRET}\n  client_secret_next: ${SCHED_SECRET_NEXT:-}\n  redirect_uri: http://%s/callback\n  max_attempts: 8\n",
		e.base, e.base, schedsim.PathAuthorize, o.clientID, testkit.FreeAddr(t))
	if o.scopes != "" {
		section += "  scopes: " + o.scopes + "\n"
	}
	e.w = testkit.NewWorkdir(t, e.forms.BaseURL, testkit.Config{Sync: o.sync, Extra: section + o.extra, LogLevel: "info"})
	return e
}

func (e *schedEnv) run(ctx context.Context, args ...string) testkit.Result {
	return testkit.RunEnv(ctx, syncdBin, e.w, e.env, args...)
}

// login runs `syncd auth login`, approves at the printed URL as a browser
// would (the simulator approves and redirects to syncd's loopback
// listener) and returns the command's result.
func (e *schedEnv) login(t *testing.T) testkit.Result {
	t.Helper()
	return loginAs(t, e.w, e.env)
}

// loginAs runs `syncd auth login` of installation w (extra: --account
// NAME) and approves at the printed URL as a browser would.
func loginAs(t *testing.T, w *testkit.Workdir, env []string, extra ...string) testkit.Result {
	t.Helper()
	cmd, rd, stderr, url := startLoginOf(t, w, env, extra...)
	resp, err := http.Get(url)
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("follow the authorization URL: %v", err)
	}
	resp.Body.Close()
	rest, _ := readAll(rd)
	err = cmd.Wait()
	res := testkit.Result{Stdout: url + "\n" + rest, Stderr: stderr.String()}
	if err != nil {
		res.Code = cmd.ProcessState.ExitCode()
	}
	return res
}

// startLogin starts `syncd auth login` and returns it once it printed the
// authorization URL, with the rest of its output still to read.
func (e *schedEnv) startLogin(t *testing.T) (*exec.Cmd, *bufio.Reader, *strings.Builder, string) {
	t.Helper()
	return startLoginOf(t, e.w, e.env)
}

// startLoginOf is startLogin of installation w (extra: --account NAME).
func startLoginOf(t *testing.T, w *testkit.Workdir, env []string, extra ...string) (*exec.Cmd, *bufio.Reader, *strings.Builder, string) {
	t.Helper()
	cmd := exec.Command(syncdBin, append([]string{"auth", "login", "--config", w.Config}, extra...)...)
	cmd.Env = append(append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey), env...)
	cmd.Dir = w.Dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	url, err := rd.ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("auth login printed no URL: %v\n%s", err, stderr.String())
	}
	return cmd, rd, stderr, strings.TrimSpace(url)
}

// signedIn is startSched after an `auth login` that succeeded.
func signedIn(t *testing.T, o schedOptions) *schedEnv {
	t.Helper()
	e := startSched(t, o)
	if res := e.login(t); res.Code != 0 {
		t.Fatalf("auth login: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	return e
}

func readAll(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

// settle stops the churn and runs a last pass, so that the output can be
// compared with a truth that stands still; it returns that pass's output.
func (e *schedEnv) settle(t *testing.T) []string {
	t.Helper()
	e.sched.SetChurnRate(0)
	time.Sleep(5 * time.Millisecond) // past the last change's time
	res := e.run(context.Background(), "once")
	if res.Code != 0 {
		t.Fatalf("last pass: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	return []string{res.Stdout, res.Stderr}
}

// checkBookings reads the bookings table back with DuckDB: every version
// (uid, version time) exactly once, and the latest view (latest version per
// uid, tombstones dropped) equal to the simulator's journal.
func (e *schedEnv) checkBookings(t *testing.T) {
	t.Helper()
	checkBookingsIn(t, testkit.OpenDuck(t), e.w.Out, e.sched.Journal())
}

// checkBookingsIn checks the bookings table under out against truth, the
// simulator's journal (of one user, or of all).
func checkBookingsIn(t *testing.T, duck *testkit.Duck, out string, truth []schedsim.JournalEntry) {
	t.Helper()
	src := testkit.Scan(out, "bookings")
	var dups int
	if err := duck.DB.QueryRow("SELECT count(*) FROM (SELECT uid, _version_time FROM " + src + " GROUP BY 1, 2 HAVING count(*) > 1)").Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups != 0 {
		t.Errorf("%d booking versions are in the output more than once", dups)
	}
	rows, err := duck.DB.Query(`SELECT uid, status, epoch_us(_version_time) FROM (` + sink.LatestQuery(src, "uid", "_version_time") + `)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type version struct {
		status string
		us     int64
	}
	latest := map[string]version{}
	for rows.Next() {
		var uid string
		var v version
		if err := rows.Scan(&uid, &v.status, &v.us); err != nil {
			t.Fatal(err)
		}
		latest[uid] = v
	}
	missing := 0
	for _, j := range truth {
		got, ok := latest[j.UID]
		switch {
		case !ok:
			missing++
			if missing <= 5 {
				t.Errorf("booking %s (%s, version %s) is not in the latest view", j.UID, j.Status, j.VersionTime.Format(time.RFC3339Nano))
			}
		case got.status != j.Status || got.us != j.VersionTime.UnixMicro():
			t.Errorf("booking %s: the latest view says %s at %d, the service %s at %d", j.UID, got.status, got.us, j.Status, j.VersionTime.UnixMicro())
		}
	}
	if len(latest) != len(truth) {
		t.Errorf("the latest view holds %d bookings, the service %d (%d missing)", len(latest), len(truth), missing)
	}
}

// TestBookingsLoginAndExactlyOnce: `auth login` against the simulator; then
// passes across several access-token expiries while bookings are created,
// cancelled and rescheduled (also while paged): every version once, the
// latest view exact; forms sync beside them; no secret in any output; the
// state file is 0600.
func TestBookingsLoginAndExactlyOnce(t *testing.T) {
	e := startSched(t, schedOptions{sim: schedsim.Config{Bookings: 120, TokenExpiry: 2 * time.Second, ChurnRate: 0.3, FaultRate: 0.05}})
	ctx := context.Background()
	res := e.run(ctx, "once")
	if res.Code != 1 || !strings.Contains(res.Stdout, "auth login") {
		t.Errorf("once before login: exit %d, stdout %s", res.Code, res.Stdout)
	}
	res = e.login(t)
	if res.Code != 0 || !strings.Contains(res.Stdout, "signed in as "+e.sched.User().Email) {
		t.Fatalf("auth login: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
	if st := e.run(ctx, "auth", "status"); st.Code != 0 || !strings.Contains(st.Stdout, "BOOKING_READ") || !strings.Contains(st.Stdout, e.sched.User().Email) {
		t.Errorf("auth status: exit %d, %s", st.Code, st.Stdout)
	}
	if v := e.run(ctx, "validate"); v.Code != 0 || !strings.Contains(v.Stdout, "ok   scheduling: signed in as "+e.sched.User().Email) {
		t.Errorf("validate after login: exit %d, %s", v.Code, v.Stdout)
	}
	var outputs []string
	for pass := 0; pass < 4; pass++ {
		res := e.run(ctx, "once")
		if res.Code != 0 {
			t.Fatalf("pass %d: exit %d\n%s\n%s", pass, res.Code, res.Stdout, tail(res.Stderr))
		}
		outputs = append(outputs, res.Stdout, res.Stderr)
		for i := 0; i < 5; i++ {
			e.sched.Create()
		}
		e.sched.Churn(6)
		time.Sleep(2500 * time.Millisecond) // past the access token's life
	}
	outputs = append(outputs, e.settle(t)...)
	if st := e.sched.Stats(); st.Refreshes < 3 {
		t.Errorf("only %d token refreshes over passes spanning several expiries", st.Refreshes)
	}
	e.checkBookings(t)
	got := testkit.OpenDuck(t).IDCounts(t, e.w.Out, defaultTable(e.forms.FormIDs()[0]))
	if len(got) == 0 {
		t.Error("the forms did not sync beside the bookings")
	}
	for _, o := range outputs {
		for _, secret := range []string{e.secret, "sim_code_", "sim_at_", "sim_rt_"} {
			if strings.Contains(o, secret) {
				t.Fatalf("a secret (%.12s...) appears in syncd's output", secret)
			}
		}
	}
	if fi, err := os.Stat(e.w.State); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v (%v), want 0600: it holds the tokens", fi.Mode().Perm(), err)
	}
}

// TestBookingsSurviveKillsDuringTokenRotation: syncd is killed with SIGKILL
// at random instants, and right after the token endpoint answered a
// refresh. Afterwards it still holds a token the simulator accepts, or says
// in one sentence to log in again; either way no booking version is lost or
// doubled once it is signed in again.
func TestBookingsSurviveKillsDuringTokenRotation(t *testing.T) {
	seed := testkit.Seed(t, "SYNCD_CRASH_SEED")
	rng := rand.New(rand.NewPCG(seed, 13))
	var mu sync.Mutex
	var onToken func()
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.URL.Path == schedsim.PathToken {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				mu.Lock()
				f := onToken
				mu.Unlock()
				if f != nil {
					f()
				}
			}
		})
	}
	e := startSched(t, schedOptions{sim: schedsim.Config{Bookings: 150, TokenExpiry: time.Hour, ChurnRate: 0.2}, wrap: wrap})
	ctx := context.Background()
	if res := e.login(t); res.Code != 0 {
		t.Fatalf("auth login: exit %d %s", res.Code, res.Stderr)
	}
	began := time.Now()
	if res := e.run(ctx, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
	}
	full := time.Since(began)
	kills, relogins := 0, 0
	for round := 0; round < 14; round++ {
		e.sched.ExpireAccessTokens() // every run starts with a refresh
		for i := 0; i < 4; i++ {
			e.sched.Create()
		}
		cmd := exec.Command(syncdBin, "once", "--config", e.w.Config)
		cmd.Env = append(append(os.Environ(), "FORMS_API_KEY="+testkit.APIKey), e.env...)
		cmd.Dir = e.w.Dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		kill := func() { once.Do(func() { _ = cmd.Process.Kill() }) }
		if round%2 == 0 {
			// Right after the token endpoint answered: the rotated pair is
			// on the wire, maybe not yet in the state.
			mu.Lock()
			onToken = kill
			mu.Unlock()
		} else {
			timer := time.AfterFunc(time.Duration(rng.Int64N(int64(full)))+time.Millisecond, kill)
			defer timer.Stop()
		}
		err := cmd.Wait()
		mu.Lock()
		onToken = nil
		mu.Unlock()
		if err != nil && cmd.ProcessState.ExitCode() == -1 {
			kills++
		}
		res := e.run(ctx, "once")
		if res.Code != 0 {
			if !strings.Contains(res.Stdout, "syncd auth login") {
				t.Fatalf("round %d: after a kill, once exited %d without saying to log in again:\n%s\n%s", round, res.Code, res.Stdout, tail(res.Stderr))
			}
			relogins++
			if r := e.login(t); r.Code != 0 {
				t.Fatalf("round %d: login again: %s", round, r.Stderr)
			}
			if res := e.run(ctx, "once"); res.Code != 0 {
				t.Fatalf("round %d: once after logging in again: %s", round, tail(res.Stderr))
			}
		}
	}
	if kills < 7 {
		t.Errorf("only %d of 14 runs were killed: the test proves little", kills)
	}
	e.settle(t)
	t.Logf("%d kills, %d times asked to log in again", kills, relogins)
	e.checkBookings(t)
}

// TestBookingsSecretRotationAndScopes: with the old secret revoked and the
// new one in client_secret_next, sign-in and refresh work and the log says
// which secret works; a token without BOOKING_READ fails the bookings with
// a sentence naming the scope, while the forms still sync.
func TestBookingsSecretRotationAndScopes(t *testing.T) {
	ctx := context.Background()
	t.Run("rotation", func(t *testing.T) {
		clients := []schedsim.Client{{ID: "rot", Secrets: []string{"sim_secret_new_0000000000"}, Scopes: []string{schedsim.ScopeBookingRead, schedsim.ScopeProfileRead}}}
		e := startSched(t, schedOptions{sim: schedsim.Config{Bookings: 30, TokenExpiry: time.Second, Clients: clients}, clientID: "rot",
			secret: "sim_secret_old_revoked000", secretNext: "sim_secret_new_0000000000"})
		if res := e.login(t); res.Code != 0 {
			t.Fatalf("auth login with the old secret revoked: exit %d\n%s", res.Code, res.Stderr)
		}
		time.Sleep(1100 * time.Millisecond)
		res := e.run(ctx, "once")
		if res.Code != 0 {
			t.Fatalf("once: exit %d %s", res.Code, tail(res.Stderr))
		}
		if !strings.Contains(res.Stderr, "client_secret_next") {
			t.Errorf("the log does not say which secret works:\n%s", tail(res.Stderr))
		}
		for _, s := range []string{"sim_secret_new_0000000000", "sim_secret_old_revoked000"} {
			if strings.Contains(res.Stdout+res.Stderr, s) {
				t.Fatal("a client secret appears in syncd's output")
			}
		}
		e.checkBookings(t)
	})
	t.Run("missing scope", func(t *testing.T) {
		e := startSched(t, schedOptions{sim: schedsim.Config{Bookings: 10}, scopes: "[PROFILE_READ]"})
		if res := e.login(t); res.Code != 0 {
			t.Fatalf("auth login: exit %d %s", res.Code, res.Stderr)
		}
		res := e.run(ctx, "once")
		if res.Code != 1 || !strings.Contains(res.Stdout, "BOOKING_READ") || !strings.Contains(res.Stdout, "PROFILE_READ") {
			t.Errorf("once without BOOKING_READ: exit %d, stdout %s", res.Code, res.Stdout)
		}
		if !strings.Contains(res.Stdout, "ok   "+e.forms.FormIDs()[0]) {
			t.Errorf("the forms did not sync while the bookings failed: %s", res.Stdout)
		}
	})
}

// TestRunAndOnceAgreeWhenASourceFails: with the Forms API refusing the key,
// `once` and `run` both sync the bookings and report the forms' failure as
// the listing's, not as a form's: one pass, whichever command runs it.
func TestRunAndOnceAgreeWhenASourceFails(t *testing.T) {
	e := signedIn(t, schedOptions{sim: schedsim.Config{Bookings: 40}})
	ctx := context.Background()
	badKey := append([]string{"FORMS_API_KEY=sk_test_revoked"}, e.env...)
	res := testkit.RunEnv(ctx, syncdBin, e.w, badKey, "once")
	if res.Code != 1 || !strings.Contains(res.Stdout, "FAIL forms (listing the account's forms)") || !strings.Contains(res.Stdout, "ok   scheduling/bookings") ||
		!strings.Contains(res.Stdout, "0 forms and scheduling/bookings, 1 failed") {
		t.Fatalf("once with the forms key refused: exit %d, want 1 with the bookings synced:\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	e.checkBookings(t)
	before := len(testkit.ParquetFiles(t, e.w.Out))

	// run, on the same failure, syncs the bookings created since.
	for range 5 {
		e.sched.Create()
	}
	time.Sleep(5 * time.Millisecond)
	addr := testkit.FreeAddr(t)
	if err := os.WriteFile(e.w.Config, append(mustRead(t, e.w.Config), []byte("server:\n  addr: "+addr+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(syncdBin, "run", "--config", e.w.Config)
	cmd.Env = append(os.Environ(), badKey...)
	cmd.Dir = e.w.Dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	synced := eventually(30*time.Second, func() bool {
		return strings.Contains(stderr.String(), `"form synced"`) && strings.Contains(stderr.String(), "scheduling/bookings")
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !synced || !strings.Contains(stderr.String(), "listing the account's forms failed") || !strings.Contains(stderr.String(), "rejected the API key") {
		t.Fatalf("run with the forms key refused did not sync the bookings beside the failure:\n%s", tail(stderr.String()))
	}
	if after := len(testkit.ParquetFiles(t, e.w.Out)); after <= before {
		t.Errorf("run wrote no bookings file (%d before, %d after)", before, after)
	}
	e.checkBookings(t)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestoreOfAnOldBackupWritesNothingTwice: a backup is taken, then passes
// commit more submissions and bookings and rotate the refresh token. Restoring
// the backup keeps the newer sign-in and adopts what the output holds, so the
// next pass writes every version once and the bookings still sync.
func TestRestoreOfAnOldBackupWritesNothingTwice(t *testing.T) {
	e := signedIn(t, schedOptions{sim: schedsim.Config{Bookings: 60, TokenExpiry: time.Second}})
	ctx := context.Background()
	if res := e.run(ctx, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	backup := filepath.Join(t.TempDir(), "old.db")
	if res := e.run(ctx, "state", "backup", backup); res.Code != 0 {
		t.Fatalf("state backup: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	form := e.forms.FormIDs()[0]
	refreshes := e.sched.Stats().Refreshes
	for range 2 {
		time.Sleep(1200 * time.Millisecond) // past the access token's life: the pass rotates the refresh token
		if _, err := e.forms.Insert(form, time.Now()); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			e.sched.Create()
		}
		time.Sleep(5 * time.Millisecond)
		if res := e.run(ctx, "once"); res.Code != 0 {
			t.Fatalf("once after the backup: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
		}
	}
	if e.sched.Stats().Refreshes == refreshes {
		t.Fatal("no refresh token was rotated after the backup: the test proves nothing about the sign-in")
	}

	res := e.run(ctx, "state", "restore", backup)
	if res.Code != 0 || !strings.Contains(res.Stdout, "kept the newer 1 sign-in") || !strings.Contains(res.Stdout, "adopted") {
		t.Fatalf("state restore: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	for range 3 {
		e.sched.Create()
	}
	time.Sleep(5 * time.Millisecond)
	if res := e.run(ctx, "once"); res.Code != 0 || !strings.Contains(res.Stdout, "ok   scheduling/bookings") {
		t.Fatalf("once after the restore: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	duck := testkit.OpenDuck(t)
	if n := duck.DuplicateVersions(t, e.w.Out, defaultTable(form)); n != 0 {
		t.Errorf("%d submission versions are in the output twice after the restore", n)
	}
	testkit.CheckExactlyOnce(t, duck.IDCounts(t, e.w.Out, defaultTable(form)), e.forms.ExpectedIDs(form))
	e.checkBookings(t)
}

// TestPendingLoginDoesNotBlockSyncing: a second `auth login` waits for its
// approval without holding the state, so a pass beside it syncs; once
// approved it saves its tokens, and the bookings sync with them.
func TestPendingLoginDoesNotBlockSyncing(t *testing.T) {
	e := signedIn(t, schedOptions{sim: schedsim.Config{Bookings: 30}})
	ctx := context.Background()
	cmd, rd, stderr, url := e.startLogin(t)
	defer cmd.Process.Kill()
	// The login waits for its approval: a pass runs beside it.
	res := e.run(ctx, "once")
	if res.Code != 0 || !strings.Contains(res.Stdout, "ok   scheduling/bookings") {
		t.Fatalf("once beside a pending auth login: exit %d, want 0\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("follow the authorization URL: %v", err)
	}
	resp.Body.Close()
	rest, _ := readAll(rd)
	if err := cmd.Wait(); err != nil || !strings.Contains(rest, "signed in as") {
		t.Fatalf("the pending login, approved after the pass: %v\n%s\n%s", err, rest, stderr.String())
	}
	e.sched.Create()
	time.Sleep(5 * time.Millisecond)
	if res := e.run(ctx, "once"); res.Code != 0 {
		t.Fatalf("once with the new sign-in: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	e.checkBookings(t)
}

// TestRevokedSignInIsReported: validate and auth status ask the token
// endpoint, so a refresh token revoked at the server is reported (with the
// command that fixes it), not read as valid from the state.
func TestRevokedSignInIsReported(t *testing.T) {
	e := signedIn(t, schedOptions{sim: schedsim.Config{Bookings: 10}})
	ctx := context.Background()
	if st := e.run(ctx, "auth", "status"); st.Code != 0 || !strings.Contains(st.Stdout, e.sched.User().Email) {
		t.Fatalf("auth status while signed in: exit %d, %s", st.Code, st.Stdout)
	}
	e.sched.RevokeRefreshTokens()
	st := e.run(ctx, "auth", "status")
	if st.Code != 1 || !strings.Contains(st.Stdout, "refused") || !strings.Contains(st.Stdout, "auth login") {
		t.Errorf("auth status after the revocation: exit %d, want 1 naming auth login:\n%s\n%s", st.Code, st.Stdout, tail(st.Stderr))
	}
	v := e.run(ctx, "validate")
	if v.Code != 1 || !strings.Contains(v.Stdout, "FAIL scheduling") || !strings.Contains(v.Stdout, "auth login") {
		t.Errorf("validate after the revocation: exit %d, want 1 with FAIL scheduling naming auth login:\n%s\n%s", v.Code, v.Stdout, tail(v.Stderr))
	}
	for _, o := range []string{st.Stdout, st.Stderr, v.Stdout, v.Stderr} {
		if strings.Contains(o, "sim_rt_") || strings.Contains(o, "sim_at_") {
			t.Fatal("a token appears in the output")
		}
	}
}

// TestDryRunPlansTheBookings: `once --dry-run` plans the bookings with the
// engine's planner, as the pass would, writing nothing and rotating no
// token; after the pass, nothing is left to plan.
func TestDryRunPlansTheBookings(t *testing.T) {
	e := signedIn(t, schedOptions{sim: schedsim.Config{Bookings: 40}})
	ctx := context.Background()
	refreshes := e.sched.Stats().Refreshes
	type plan struct {
		Bookings *struct {
			Rows     int64  `json:"rows"`
			Requests int64  `json:"estimated_requests"`
			Error    string `json:"error"`
		} `json:"bookings"`
	}
	dry := func() plan {
		t.Helper()
		res := e.run(ctx, "once", "--dry-run", "-o", "json")
		if res.Code != 0 {
			t.Fatalf("once --dry-run: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
		}
		var p plan
		if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil || p.Bookings == nil {
			t.Fatalf("once --dry-run -o json: %v, bookings %v\n%s", err, p.Bookings, res.Stdout)
		}
		return p
	}
	p := dry()
	if want := int64(len(e.sched.Journal())); p.Bookings.Error != "" || p.Bookings.Rows < want*8/10 || p.Bookings.Requests < 2 {
		t.Errorf("the dry run's bookings: %+v, want about %d rows", *p.Bookings, want)
	}
	if _, err := os.Stat(e.w.Out); err == nil && len(testkit.ParquetFiles(t, e.w.Out)) > 0 {
		t.Error("the dry run wrote output")
	}
	if e.sched.Stats().Refreshes != refreshes {
		t.Error("the dry run refreshed the sign-in")
	}
	if res := e.run(ctx, "once"); res.Code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", res.Code, res.Stdout, tail(res.Stderr))
	}
	if p := dry(); p.Bookings.Rows != 0 {
		t.Errorf("after the pass the dry run still plans %d bookings", p.Bookings.Rows)
	}
}
