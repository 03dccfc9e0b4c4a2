package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// series lists the series of the metrics named, one a line:
// name{label=value,...}.
func series(t *testing.T, m *Metrics, names ...string) string {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			b.WriteString(f.GetName() + "{" + strings.Join(labels, ",") + "}\n")
		}
	}
	return b.String()
}

func TestAccountLabel(t *testing.T) {
	m := New(nil)
	m.ObservePass(Pass{Source: "forms", Stream: "f", Rows: 1})
	m.ObservePass(Pass{Account: "acme", Source: "forms", Stream: "f", Rows: 1})
	m.ObserveRequest("list_forms", 200, 1, 0, nil)
	m.ForAccount("acme").ObserveRequest("list_forms", 429, 2, 0, nil)
	m.ForAccount("acme").ObserveSkipped("forms", "g")
	m.ObserveSkipped("forms", "g")

	got := series(t, m, "syncd_rows_written_total", "syncd_requests_total", "syncd_rate_limited_total", "syncd_passes_skipped_total")
	for _, want := range []string{
		"syncd_rows_written_total{account=default,source=forms,stream=f}",
		"syncd_rows_written_total{account=acme,source=forms,stream=f}",
		"syncd_requests_total{account=default,endpoint=list_forms,status=200}",
		"syncd_requests_total{account=acme,endpoint=list_forms,status=429}",
		"syncd_rate_limited_total{account=acme}",
		"syncd_passes_skipped_total{account=acme,source=forms,stream=g}",
		"syncd_passes_skipped_total{account=default,source=forms,stream=g}",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no series %s in\n%s", want, got)
		}
	}
}

func TestReadyzNamesTheAccount(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := New(func() time.Time { return now })
	srv := httptest.NewServer(m.Handler(nil, time.Minute))
	defer srv.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	m.ObservePass(Pass{Account: "acme", Source: "forms", Stream: "f", Err: errors.New("500 from the API")})
	m.ForAccount("beta").ObserveFailure(errors.New("401 key rejected"))
	if code, _ := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz %d within the grace", code)
	}
	now = now.Add(time.Hour)
	code, body := readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stream f of account acme is failing: 500 from the API") {
		t.Errorf("/readyz %d %q; want 503 naming stream f of account acme", code, body)
	}

	m.ForgetAccount("acme")
	if _, body = readyz(); !strings.Contains(body, "account beta is failing: 401 key rejected") {
		t.Errorf("/readyz %q; want it to name account beta", body)
	}
	m.ForAccount("beta").ObserveFailure(nil)
	if code, body = readyz(); code != http.StatusOK {
		t.Errorf("/readyz %d %q once all is well", code, body)
	}
}

func TestForget(t *testing.T) {
	m := New(nil)
	for _, a := range []string{"acme", "beta"} {
		m.ObservePass(Pass{Account: a, Source: "forms", Stream: "f", Rows: 1, CoveredEnd: time.Now()})
		m.ObservePass(Pass{Account: a, Source: "forms", Stream: "g", Rows: 1})
		m.ForAccount(a).ObserveRequest("list_forms", 429, 2, 0, nil)
	}
	m.ForgetStream("beta", "forms", "g")
	m.ForgetAccount("acme")
	got := series(t, m, "syncd_rows_written_total", "syncd_checkpoint_lag_seconds", "syncd_seconds_since_last_success",
		"syncd_requests_total", "syncd_request_retries_total", "syncd_rate_limited_total")
	if strings.Contains(got, "account=acme") || strings.Contains(got, "stream=g") {
		t.Errorf("forgotten series remain:\n%s", got)
	}
	for _, want := range []string{
		"syncd_rows_written_total{account=beta,source=forms,stream=f}",
		"syncd_seconds_since_last_success{account=beta,source=forms,stream=f}",
		"syncd_requests_total{account=beta,endpoint=list_forms,status=429}",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no series %s in\n%s", want, got)
		}
	}
}

func TestObserveReload(t *testing.T) {
	m := New(nil)
	m.ObserveReload(nil)
	m.ObserveReload(errors.New("bad"))
	m.ObserveReload(errors.New("bad"))
	const want = `
# HELP syncd_config_reloads_total Configuration reloads (SIGHUP, or the file changed) by result: ok, or error (the running entries kept running).
# TYPE syncd_config_reloads_total counter
syncd_config_reloads_total{result="error"} 2
syncd_config_reloads_total{result="ok"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "syncd_config_reloads_total"); err != nil {
		t.Error(err)
	}
}

// A form that fails from its first pass in this process (a new form, or
// any form after a restart) must show in the gauge an alert watches, rising
// from its first failure; a success restarts it from the success.
func TestSecondsSinceLastSuccessOfAFormThatNeverSucceeded(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	now := at
	m := New(func() time.Time { return now })
	fails := errors.New("list submissions of form f: 500")
	const family = "syncd_seconds_since_last_success"
	gauge := func(value string) string {
		return `
# HELP syncd_seconds_since_last_success Seconds since the last successful pass of each form.
# TYPE syncd_seconds_since_last_success gauge
syncd_seconds_since_last_success{account="default",source="forms",stream="f"} ` + value + "\n"
	}
	steps := []struct {
		advance time.Duration
		err     error
		want    string
	}{
		{0, fails, gauge("0")},
		{time.Hour, fails, gauge("3600")},        // still counted from the first failure
		{time.Hour, nil, gauge("0")},             // a success restarts it
		{30 * time.Minute, fails, gauge("1800")}, // and a later failure does not
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		m.ObservePass(Pass{Source: "forms", Stream: "f", Err: s.err})
		if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(s.want), family); err != nil {
			t.Errorf("step %d: %v", i, err)
		}
	}
}
