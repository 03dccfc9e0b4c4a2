package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/simhook"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/testkit"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// The webhook end-to-end runs: `syncd run` on a 1-hour cron (its first pass
// at start registers the webhooks; no scheduled pass comes during the
// test), with sync.webhooks.public_url pointing at its own server. What
// reaches the output during the test came through deliveries.
//
// SYNCD_WEBHOOK_SECONDS sets how long events are created (default 30s for
// make test; make bench uses 180s); SYNCD_WEBHOOK_RESULTS, when set, is a
// file the latency test appends its figures to (bench/RESULTS.md's source).
// SYNCD_WEBHOOK_SINK=iceberg runs the latency test with the Iceberg sink (a
// warehouse in the workdir, the embedded sqlite catalog) instead of Parquet.

const hookSecret = "e2e-webhook-secret-0123456789abcdef"

// hookEnv is a schedEnv whose syncd receives webhooks.
type hookEnv struct {
	*schedEnv
	addr string
	env  []string
	// lake is the Iceberg warehouse when the sink is Iceberg (useIceberg);
	// empty for Parquet. iceSeen is what its polls saw.
	lake    string
	iceSeen icebergSeen
}

// useIceberg switches h's config to the Iceberg sink, a warehouse in the
// workdir on the embedded sqlite catalog.
func (h *hookEnv) useIceberg(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(h.w.Config)
	if err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(h.w.Dir, "lake")
	parquet := fmt.Sprintf("sink:\n  type: parquet\n  parquet:\n    path: %s\n", h.w.Out)
	cfg := strings.Replace(string(raw), parquet, "sink:\n  type: iceberg\n  iceberg:\n    warehouse: "+lake+"\n", 1)
	if cfg == string(raw) {
		t.Fatal("the workdir's config has no Parquet sink section to replace")
	}
	if err := os.WriteFile(h.w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h.lake = lake
}

func startHooks(t *testing.T) *hookEnv {
	t.Helper()
	return startHooksScopes(t, "[BOOKING_READ, PROFILE_READ, WEBHOOK_READ, WEBHOOK_WRITE]")
}

func startHooksScopes(t *testing.T, scopes string) *hookEnv {
	t.Helper()
	return startHooksWith(t, scopes, "0 * * * *")
}

// startHooksWith is startHooks with the scheduling scopes and sync.schedule
// given.
func startHooksWith(t *testing.T, scopes, schedule string) *hookEnv {
	t.Helper()
	e := signedIn(t, schedOptions{scopes: scopes})
	h := &hookEnv{schedEnv: e, addr: testkit.FreeAddr(t), env: append(slices.Clone(e.env), "SYNCD_WEBHOOK_SECRET="+hookSecret)}
	raw, err := os.ReadFile(e.w.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A 1-hour cron; a safety lag of 1s (a triggered pass covers up to now
	// - 1s, so it starts 1s after the delivery).
	sync := "sync:\n  safety_lag: 1s\n  schedule: \"" + schedule + "\"\n  jitter: 0s\n  webhooks:\n    public_url: http://" + h.addr +
		"\n    secret: ${SYNCD_WEBHOOK_SECRET}\n    debounce: 250ms\n"
	cfg := strings.Replace(string(raw), "sync:\n  safety_lag: 0s\n", sync, 1)
	if cfg == string(raw) {
		t.Fatal("the workdir's config has no sync section to replace")
	}
	cfg += "server:\n  addr: " + h.addr + "\n"
	if err := os.WriteFile(e.w.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// start starts `syncd run`; a failing test logs its tail
// (SYNCD_WEBHOOK_DAEMON_LOG=FILE keeps the whole log).
func (h *hookEnv) start(t *testing.T) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, _, stderr, err := testkit.StartEnv(syncdBin, h.w, h.env, "run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("syncd run's log:\n%s", tail(stderr.String()))
			if f := os.Getenv("SYNCD_WEBHOOK_DAEMON_LOG"); f != "" {
				_ = os.WriteFile(f, stderr.Bytes(), 0o644) // the whole log, for a failure's story
			}
		}
	})
	return cmd, stderr
}

// daemon starts `syncd run` and waits until its first pass has registered
// the form's and the user's webhooks and committed.
func (h *hookEnv) daemon(t *testing.T) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, stderr := h.start(t)
	ok := eventually(60*time.Second, func() bool {
		return len(h.forms.Webhooks()) == 1 && len(h.sched.Webhooks()) == 1 &&
			scrape(t, h.addr, `syncd_last_success_timestamp_seconds{account="default",source="scheduling"`) > 0 &&
			scrape(t, h.addr, `syncd_last_success_timestamp_seconds{account="default",source="forms"`) > 0
	})
	if !ok {
		t.Fatalf("the first pass did not register both webhooks (forms %d, scheduling %d)\n%s",
			len(h.forms.Webhooks()), len(h.sched.Webhooks()), tail(stderr.String()))
	}
	return cmd, stderr
}

// event is a submission or a booking the test created, and when.
type event struct {
	bookings bool
	id       string
	created  time.Time
}

// create makes submissions and bookings at random instants (mean every
// gap) for d, or until stop closes.
func (h *hookEnv) create(t *testing.T, seed uint64, d, gap time.Duration, stop <-chan struct{}) []event {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	form := h.forms.FormIDs()[0]
	var out []event
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if rnd.IntN(2) == 0 {
			s, err := h.forms.SubmitNow(form)
			if err != nil {
				t.Error(err) // Error, not Fatal: create may run on a goroutine of its own
				return out
			}
			out = append(out, event{id: s.SubmissionID, created: s.SubmissionTime})
		} else {
			b := h.sched.CreateBooking()
			out = append(out, event{bookings: true, id: b.UID, created: b.CreatedAt})
		}
		select {
		case <-time.After(time.Duration(rnd.Int64N(int64(2 * gap)))):
		case <-stop:
			return out
		}
	}
	return out
}

// committedAt is, per id of a table, when the Parquet file that first
// holds it was written (renamed into place: the batch's commit).
func committedAt(t *testing.T, duck *testkit.Duck, out, table, key string) map[string]time.Time {
	t.Helper()
	res := map[string]time.Time{}
	if !testkit.HasFiles(out, table) {
		return res
	}
	glob := strings.ReplaceAll(filepath.Join(out, table, "**", "*.parquet"), "'", "''")
	rows, err := duck.DB.Query(fmt.Sprintf("SELECT %s, filename FROM read_parquet('%s', hive_partitioning = true, union_by_name = true, filename = true)", key, glob))
	if err != nil {
		t.Fatalf("read table %s: %v", table, err)
	}
	defer rows.Close()
	mtimes := map[string]time.Time{}
	for rows.Next() {
		var id, file string
		if err := rows.Scan(&id, &file); err != nil {
			t.Fatal(err)
		}
		m, ok := mtimes[file]
		if !ok {
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			m = fi.ModTime()
			mtimes[file] = m
		}
		if prev, ok := res[id]; !ok || m.Before(prev) {
			res[id] = m
		}
	}
	return res
}

// arrived waits until every event is in the output and returns each one's
// latency from creation to commit.
func (h *hookEnv) arrived(t *testing.T, events []event, within time.Duration) (forms, bookings []time.Duration) {
	t.Helper()
	duck := testkit.OpenDuck(t)
	table := poller.DefaultTable(h.forms.FormIDs()[0])
	var subs, books map[string]time.Time
	missing := func() []string {
		if h.lake != "" {
			subs = h.iceSeen.poll(t, duck, h.lake, h.w.State, table, "submission_id")
			books = h.iceSeen.poll(t, duck, h.lake, h.w.State, "bookings", "uid")
		} else {
			subs = committedAt(t, duck, h.w.Out, table, "submission_id")
			books = committedAt(t, duck, h.w.Out, "bookings", "uid")
		}
		var m []string
		for _, e := range events {
			if _, ok := map[bool]map[string]time.Time{false: subs, true: books}[e.bookings][e.id]; !ok {
				m = append(m, e.id)
			}
		}
		return m
	}
	deadline := time.Now().Add(within)
	for m := missing(); len(m) > 0; m = missing() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never reached the output through webhooks (the cron is hourly): %v", len(m), len(events), head(m))
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, e := range events {
		if e.bookings {
			bookings = append(bookings, books[e.id].Sub(e.created))
		} else {
			forms = append(forms, subs[e.id].Sub(e.created))
		}
	}
	return forms, bookings
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func webhookSeconds(def time.Duration) time.Duration {
	if v := os.Getenv("SYNCD_WEBHOOK_SECONDS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return def
}

// sumMetric sums every series of a counter.
func sumMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// onceRequests runs `syncd once` and returns the requests its streams made.
func (h *hookEnv) onceRequests(t *testing.T) int64 {
	t.Helper()
	res := testkit.RunEnv(context.Background(), syncdBin, h.w, h.env, "once", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("syncd once: exit %d\n%s", res.Code, tail(res.Stderr))
	}
	var entries []struct {
		Requests int64 `json:"requests"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &entries); err != nil {
		t.Fatalf("syncd once -o json: %v\n%s", err, res.Stdout)
	}
	var n int64
	for _, e := range entries {
		n += e.Requests
	}
	return n
}

func stop(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("syncd run did not stop cleanly: %v\n%s", err, tail(stderr.String()))
	}
}

// TestWebhooksLatency: submissions and bookings created at random reach the
// Parquet output (or the Iceberg tables: SYNCD_WEBHOOK_SINK=iceberg) through
// webhooks alone; it reports the latency from creation to committed row,
// and the requests it cost against a cron.
func TestWebhooksLatency(t *testing.T) {
	h := startHooks(t)
	sinkName := "parquet"
	switch v := os.Getenv("SYNCD_WEBHOOK_SINK"); v {
	case "", "parquet":
	case "iceberg":
		h.useIceberg(t)
		sinkName = "iceberg"
	default:
		t.Fatalf("SYNCD_WEBHOOK_SINK=%q: parquet or iceberg", v)
	}
	cmd, stderr := h.daemon(t)
	before := sumMetric(t, h.addr, "syncd_requests_total")
	d := webhookSeconds(30 * time.Second)
	var watched <-chan struct{}
	stopWatch := make(chan struct{})
	if h.lake != "" {
		watched = h.watch(t, stopWatch)
	}
	events := h.create(t, 11, d, 700*time.Millisecond, nil)
	close(stopWatch)
	if watched != nil {
		<-watched
	}
	formsLat, bookingsLat := h.arrived(t, events, 60*time.Second)
	spent := sumMetric(t, h.addr, "syncd_requests_total") - before
	passes := sumMetric(t, h.addr, "syncd_webhook_passes_total")
	// Beside the running daemon, `syncd webhooks` reads its /status.
	res := testkit.RunEnv(context.Background(), syncdBin, h.w, h.env, "webhooks", "-o", "json")
	var listed []struct{ Source, ID string }
	if err := json.Unmarshal([]byte(res.Stdout), &listed); res.Code != 0 || err != nil || len(listed) != 2 {
		t.Errorf("syncd webhooks beside the daemon: exit %d, %v, %s\n%s", res.Code, err, res.Stdout, tail(res.Stderr))
	}
	hist := scrape(t, h.addr, `syncd_webhook_latency_seconds_count{source="forms"}`)
	stop(t, cmd, stderr)
	if hist <= 0 {
		t.Errorf("syncd_webhook_latency_seconds has no forms sample")
	}
	all := append(slices.Clone(formsLat), bookingsLat...)
	idle := h.onceRequests(t) // a scheduled pass with nothing new
	perHour := func(n float64) float64 { return n * float64(time.Hour) / float64(d) }
	report := fmt.Sprintf("sink %s; events %d (%d submissions, %d bookings) over %s; creation -> committed row: p50 %s, p99 %s (submissions p50 %s p99 %s; bookings p50 %s p99 %s); "+
		"webhook passes %.0f, requests %.0f (%.2f per event, %.0f/h at this rate); a pass with nothing new costs %d requests: a 1-minute cron %d/h, a 5-second cron (the same freshness) %d/h",
		sinkName, len(events), len(formsLat), len(bookingsLat), d,
		percentile(all, .5).Round(time.Millisecond), percentile(all, .99).Round(time.Millisecond),
		percentile(formsLat, .5).Round(time.Millisecond), percentile(formsLat, .99).Round(time.Millisecond),
		percentile(bookingsLat, .5).Round(time.Millisecond), percentile(bookingsLat, .99).Round(time.Millisecond),
		passes, spent, spent/float64(len(events)), perHour(spent), idle, 60*idle, 720*idle)
	t.Log(report)
	if f := os.Getenv("SYNCD_WEBHOOK_RESULTS"); f != "" {
		out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(out, "%s TestWebhooksLatency: %s\n", time.Now().UTC().Format(time.RFC3339), report)
		out.Close()
	}
	if passes >= float64(len(events)) && len(events) > 10 {
		t.Errorf("%.0f passes for %d events: deliveries are not debounced", passes, len(events))
	}
}

// forged is a delivery syncd must refuse.
type forged struct {
	name   string
	path   string
	body   []byte
	header map[string]string
	status int
}

// TestWebhooksFaultsAndForgeries: deliveries dropped (20%), duplicated and
// reordered; the output is exact after the next scheduled pass. Forged
// deliveries are refused and write and trigger nothing.
func TestWebhooksFaultsAndForgeries(t *testing.T) {
	h := startHooks(t)
	faults := simhook.Faults{DropRate: 0.2, DuplicateRate: 0.3, DelayMin: 0, DelayMax: 1500 * time.Millisecond}
	bare := faults
	bare.BareRate = 0.3
	if err := h.forms.SetWebhookFaults(bare); err != nil {
		t.Fatal(err)
	}
	signed := faults
	signed.BadSignatureRate = 0.15 // the simulator's own forgeries: refused 401
	if err := h.sched.SetWebhookFaults(signed); err != nil {
		t.Fatal(err)
	}
	cmd, stderr := h.daemon(t)

	// Forgeries first, while nothing else happens: they must move the
	// refused counters and nothing else.
	form := h.forms.FormIDs()[0]
	good := strings.TrimPrefix(formsource.WebhookURL("http://"+h.addr, []byte(hookSecret), "default", form), "http://"+h.addr)
	sub := `{"formId":"` + form + `","submission":{"submissionId":"forged-1","submissionTime":"2024-01-01T10:00:00Z","questions":[]}}`
	booking := []byte(`{"triggerEvent":"BOOKING_CREATED","createdAt":"2024-01-01T10:00:00Z","payload":{"uid":"forged"}}`)
	otherSecret := scheduling.SigningSecret([]byte("another-secret-0123456789"), "default")
	tenMB := append(append([]byte(`{"formId":"`+form+`","pad":"`), bytes.Repeat([]byte("x"), 10<<20)...), `"}`...)
	cases := []forged{
		{"forms: no token", "/webhooks/forms/default/" + form, []byte(sub), nil, 404},
		{"forms: wrong token", "/webhooks/forms/default/" + form + "/" + strings.Repeat("0", 40), []byte(sub), nil, 404},
		{"forms: 10 MB body", good, tenMB, nil, 413},
		{"forms: malformed JSON", good, []byte(`{"formId":`), nil, 400},
		{"scheduling: no signature", "/webhooks/scheduling/default", booking, nil, 401},
		{"scheduling: bad HMAC", "/webhooks/scheduling/default", booking, map[string]string{scheduling.SignatureHeader: scheduling.Sign(otherSecret, booking)}, 401},
		{"scheduling: 10 MB body", "/webhooks/scheduling/default", tenMB, map[string]string{scheduling.SignatureHeader: scheduling.Sign(scheduling.SigningSecret([]byte(hookSecret), "default"), tenMB)}, 413},
	}
	passesBefore := sumMetric(t, h.addr, "syncd_webhook_passes_total")
	requestsBefore := sumMetric(t, h.addr, "syncd_requests_total")
	simBefore := h.forms.Stats().Requests
	bookingsBefore := h.sched.Stats().BookingRequests
	files := len(testkit.ParquetFiles(t, h.w.Out))
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr+c.path, bytes.NewReader(c.body))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			// A server may close the connection on a body it refuses
			// before reading it all; the answer may still be lost.
			t.Logf("%s: %v", c.name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	time.Sleep(3 * time.Second) // past the safety lag and the debounce: a pass would have started
	if v := sumMetric(t, h.addr, "syncd_webhook_passes_total"); v != passesBefore {
		t.Errorf("forged deliveries triggered %.0f passes", v-passesBefore)
	}
	if v := sumMetric(t, h.addr, "syncd_requests_total"); v != requestsBefore {
		t.Errorf("forged deliveries cost %.0f requests", v-requestsBefore)
	}
	if h.forms.Stats().Requests != simBefore || h.sched.Stats().BookingRequests != bookingsBefore {
		t.Errorf("forged deliveries reached the simulators")
	}
	if n := len(testkit.ParquetFiles(t, h.w.Out)); n != files {
		t.Errorf("forged deliveries wrote %d files", n-files)
	}
	refused := 0.0
	for _, o := range []string{webhook.OutcomeRefusedAuth, webhook.OutcomeRefusedSize, webhook.OutcomeRefusedBody, webhook.OutcomeRefusedUnknown} {
		for _, src := range []string{"forms", "scheduling", "unknown"} {
			refused += max(0, scrape(t, h.addr, `syncd_webhook_deliveries_total{outcome="`+o+`",source="`+src+`"}`))
		}
	}
	if refused < float64(len(cases)) {
		t.Errorf("%.0f deliveries counted refused, want %d", refused, len(cases))
	}

	// Real traffic through the faults.
	events := h.create(t, 23, webhookSeconds(20*time.Second), 300*time.Millisecond, nil)
	if err := h.forms.DrainWebhooks(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.sched.DrainWebhooks(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // the last triggered passes
	st := h.forms.Stats().Webhooks
	t.Logf("forms deliveries: %+v; scheduling: %+v", st, h.sched.WebhookStats())
	if st.Dropped == 0 || st.Duplicated == 0 {
		t.Errorf("the faults were not exercised: %+v", st)
	}
	if bad := h.sched.WebhookStats().BadSignature; bad == 0 {
		t.Errorf("no delivery with a bad signature was sent")
	} else if got := scrape(t, h.addr, `syncd_webhook_deliveries_total{outcome="refused_auth",source="scheduling"}`); got < float64(bad) {
		t.Errorf("%.0f scheduling deliveries refused for their signature, want at least the %d the simulator forged", got, bad)
	}
	accepted := scrape(t, h.addr, `syncd_webhook_deliveries_total{outcome="accepted",source="forms"}`)
	if accepted <= 0 {
		t.Errorf("no forms delivery accepted")
	}
	stop(t, cmd, stderr)
	for _, secret := range []string{hookSecret, formsource.WebhookToken([]byte(hookSecret), "default", form), scheduling.SigningSecret([]byte(hookSecret), "default")} {
		if strings.Contains(stderr.String(), secret) {
			t.Error("the daemon's log holds the webhook secret, a path token or a signing secret")
		}
	}
	// The next scheduled pass (the same as `syncd once`) makes it exact.
	h.onceRequests(t)
	checkOutput(t, h.forms, h.w, events[len(events)-1].created)
	h.checkBookings(t)
	h.listAndRemove(t)
}

// listAndRemove: `syncd webhooks -o json` lists the form's and the user's
// webhooks as the simulators have them; `syncd webhooks remove` deletes
// them at both and in the state.
func (h *hookEnv) listAndRemove(t *testing.T) {
	t.Helper()
	type row struct {
		Account, Source, Stream, ID string
	}
	list := func(args ...string) []row {
		t.Helper()
		res := testkit.RunEnv(context.Background(), syncdBin, h.w, h.env, append(args, "-o", "json")...)
		if res.Code != 0 {
			t.Fatalf("syncd %v: exit %d\n%s", args, res.Code, tail(res.Stderr))
		}
		var rows []row
		if err := json.Unmarshal([]byte(res.Stdout), &rows); err != nil {
			t.Fatalf("syncd %v -o json: %v\n%s", args, err, res.Stdout)
		}
		return rows
	}
	rows := list("webhooks")
	fh, sh := h.forms.Webhooks(), h.sched.Webhooks()
	if len(rows) != 2 || len(fh) != 1 || len(sh) != 1 ||
		rows[0] != (row{"default", "forms", h.forms.FormIDs()[0], strconv.FormatInt(fh[0].ID, 10)}) ||
		rows[1] != (row{"default", "scheduling", "bookings", sh[0].ID}) {
		t.Fatalf("syncd webhooks lists %+v; the simulators have %+v and %+v", rows, fh, sh)
	}
	if removed := list("webhooks", "remove"); len(removed) != 2 {
		t.Errorf("syncd webhooks remove removed %+v", removed)
	}
	if len(h.forms.Webhooks()) != 0 || len(h.sched.Webhooks()) != 0 {
		t.Errorf("webhooks left at the services: %+v, %+v", h.forms.Webhooks(), h.sched.Webhooks())
	}
	if rows := list("webhooks"); len(rows) != 0 {
		t.Errorf("syncd webhooks still lists %+v after remove", rows)
	}
}

// TestWebhooksWithoutScope: a scheduling sign-in without WEBHOOK_WRITE is
// one warning line; the form's webhook is registered and the bookings are
// polled as always.
func TestWebhooksWithoutScope(t *testing.T) {
	h := startHooksScopes(t, "[BOOKING_READ, PROFILE_READ]")
	cmd, stderr := h.start(t)
	ok := eventually(60*time.Second, func() bool {
		return len(h.forms.Webhooks()) == 1 &&
			scrape(t, h.addr, `syncd_last_success_timestamp_seconds{account="default",source="scheduling"`) > 0
	})
	if !ok {
		t.Fatalf("the first pass did not register the form's webhook or sync the bookings\n%s", tail(stderr.String()))
	}
	failures := scrape(t, h.addr, `syncd_pass_failures_total{account="default",source="scheduling"`)
	stop(t, cmd, stderr)
	if n := strings.Count(stderr.String(), "lacks WEBHOOK_WRITE"); n != 1 {
		t.Errorf("%d lines about the missing scope, want 1\n%s", n, tail(stderr.String()))
	}
	if len(h.sched.Webhooks()) != 0 {
		t.Errorf("a bookings webhook was registered without the scope")
	}
	if failures > 0 {
		t.Errorf("the bookings pass failed without the webhook scope")
	}
}

// TestWebhooksLostRegistered: the Forms API forgets a webhook without
// telling (it cannot be listed); the next scheduled pass finds submissions no
// delivery announced and registers it again, and deliveries resume.
func TestWebhooksLostRegistered(t *testing.T) {
	h := startHooksWith(t, "[BOOKING_READ, PROFILE_READ, WEBHOOK_READ, WEBHOOK_WRITE]", "@every 8s")
	cmd, stderr := h.daemon(t)
	lost := h.forms.Webhooks()[0].ID
	if !h.forms.ForgetWebhook(lost) {
		t.Fatal("the simulator did not have the webhook")
	}
	form := h.forms.FormIDs()[0]
	for range 3 {
		if _, err := h.forms.SubmitNow(form); err != nil {
			t.Fatal(err)
		}
	}
	ok := eventually(40*time.Second, func() bool {
		hs := h.forms.Webhooks()
		return len(hs) == 1 && hs[0].ID != lost
	})
	if !ok {
		t.Fatalf("the lost webhook was not registered again: %+v\n%s", h.forms.Webhooks(), tail(stderr.String()))
	}
	accepted := func() float64 {
		return max(0, scrape(t, h.addr, `syncd_webhook_deliveries_total{outcome="accepted",source="forms"}`)) +
			max(0, scrape(t, h.addr, `syncd_webhook_deliveries_total{outcome="debounced",source="forms"}`))
	}
	before := accepted()
	if _, err := h.forms.SubmitNow(form); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool { return accepted() > before }) {
		t.Errorf("no delivery through the new webhook")
	}
	stop(t, cmd, stderr)
}

// TestWebhooksKilled: `syncd run` SIGKILLed at random instants while
// deliveries arrive; after a restart and a last pass, every submission and
// booking is in the output exactly once.
func TestWebhooksKilled(t *testing.T) {
	h := startHooks(t)
	cmd, _ := h.daemon(t)
	stopCreating := make(chan struct{})
	done := make(chan []event)
	go func() { done <- h.create(t, 37, time.Hour, 150*time.Millisecond, stopCreating) }()
	rnd := rand.New(rand.NewPCG(testkit.Seed(t, "SYNCD_WEBHOOK_SEED"), 1))
	kills := 0
	end := time.Now().Add(webhookSeconds(20 * time.Second))
	for time.Now().Before(end) {
		time.Sleep(time.Duration(500+rnd.IntN(2500)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		kills++
		c, _, _, err := testkit.StartEnv(syncdBin, h.w, h.env, "run")
		if err != nil {
			t.Fatal(err)
		}
		cmd = c
	}
	close(stopCreating)
	events := <-done
	time.Sleep(3 * time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// Some events reached the output between the kills, through triggered
	// passes: the kills landed among them, not on an idle daemon.
	duck := testkit.OpenDuck(t)
	subs := committedAt(t, duck, h.w.Out, poller.DefaultTable(h.forms.FormIDs()[0]), "submission_id")
	books := committedAt(t, duck, h.w.Out, "bookings", "uid")
	early := 0
	for _, e := range events {
		if _, ok := map[bool]map[string]time.Time{false: subs, true: books}[e.bookings][e.id]; ok {
			early++
		}
	}
	t.Logf("%d kills, %d events; of them in the output before the last pass: %d", kills, len(events), early)
	if early == 0 {
		t.Error("nothing reached the output through webhooks between the kills")
	}
	h.onceRequests(t)
	checkOutput(t, h.forms, h.w, events[len(events)-1].created)
	h.checkBookings(t)
}
