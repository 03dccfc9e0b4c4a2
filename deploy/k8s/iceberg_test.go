package k8s_test

// The Iceberg sink (overlays/iceberg): its catalog's secrets come from the
// Secret syncd-iceberg through env, never from the ConfigMap, and the
// switch to a PostgreSQL catalog that deploy/k8s/README.md documents
// renders and passes every check of TestManifests.

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncd-dev/syncd/internal/config"
)

// icebergSecret is the Secret the catalog's secrets come from
// (secrets.example.yaml), each key named as its variable.
const icebergSecret = "syncd-iceberg"

// icebergSecretEnv are the variables syncd reads an Iceberg catalog's
// secrets from: a REST catalog's client credential or token, a PostgreSQL
// catalog's password.
var icebergSecretEnv = []string{"SYNCD_ICEBERG_CREDENTIAL", "SYNCD_ICEBERG_TOKEN", "PGPASSWORD"}

// checkIceberg: whatever the sink, the catalog's secret variables come
// from secretKeyRef only; with sink.type iceberg, the catalog's secret is
// set, its URI holds no password, and what the sink writes locally is on
// a volume (a bucket warehouse on Cloud Storage: Workload Identity).
func checkIceberg(t *testing.T, r *rendered, where string, ps *corev1.PodSpec, c *corev1.Container, cfg *config.Config) {
	t.Helper()
	env := map[string]*corev1.EnvVar{}
	for i := range c.Env {
		env[c.Env[i].Name] = &c.Env[i]
	}
	for _, name := range icebergSecretEnv {
		e := env[name]
		switch {
		case e == nil:
		case e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil:
			t.Errorf("%s: env %s must come from a secretKeyRef (Secret %s), not a value or a ConfigMap", where, name, icebergSecret)
		case e.ValueFrom.SecretKeyRef.Name != icebergSecret || e.ValueFrom.SecretKeyRef.Key != name:
			t.Errorf("%s: env %s from Secret %s key %s, want Secret %s key %s", where, name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key, icebergSecret, name)
		case e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional:
			t.Errorf("%s: env %s: the Secret key must not be optional (the catalog would refuse syncd at every pass)", where, name)
		}
	}
	if cfg.Sink.Type != "iceberg" || cfg.Sink.Iceberg == nil {
		return
	}
	ic := cfg.Sink.Iceberg
	if u, err := url.Parse(ic.Catalog.URI); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			t.Errorf("%s: sink.iceberg.catalog.uri holds a password: it would be in the ConfigMap", where)
		}
	}
	switch ic.Catalog.Type {
	case "rest":
		if env["SYNCD_ICEBERG_CREDENTIAL"] == nil && env["SYNCD_ICEBERG_TOKEN"] == nil {
			t.Errorf("%s: a REST catalog, but the container sets neither SYNCD_ICEBERG_CREDENTIAL nor SYNCD_ICEBERG_TOKEN (from the Secret %s)", where, icebergSecret)
		}
	case "postgres":
		if env["PGPASSWORD"] == nil {
			t.Errorf("%s: a PostgreSQL catalog, but the container does not set PGPASSWORD (from the Secret %s)", where, icebergSecret)
		}
	case "sqlite":
		writable(t, where, ps, c, ic.Catalog.URI, "persistentVolumeClaim")
	}
	if scheme, _, ok := strings.Cut(ic.Warehouse, "://"); !ok {
		writable(t, where, ps, c, ic.Warehouse+"/x", "persistentVolumeClaim")
	} else if scheme == "gs" {
		workloadIdentity(t, r, where, ps)
	}
}

// TestIcebergOverlay: overlays/iceberg is the REST catalog its README
// section describes, with the credential from the Secret.
func TestIcebergOverlay(t *testing.T) {
	r := render(t, "overlays/iceberg")
	example := parseConfig(t, "configs/syncd.example.yaml", uncommentScheduling(t, readFile(t, "../../configs/syncd.example.yaml")), schedulingEnv)
	if len(r.cronJobs) != 1 {
		t.Fatalf("%d CronJobs, want 1", len(r.cronJobs))
	}
	cfg := checkCronJob(t, r, r.cronJobs[0], example)
	if cfg == nil {
		t.FailNow()
	}
	ic := cfg.Sink.Iceberg
	if cfg.Sink.Type != "iceberg" || ic == nil || ic.Catalog.Type != "rest" || ic.Catalog.Scope != "PRINCIPAL_ROLE:ALL" || !strings.HasPrefix(ic.Warehouse, "gs://") {
		t.Errorf("sink %+v, want type iceberg, a gs:// warehouse and a rest catalog with scope PRINCIPAL_ROLE:ALL", cfg.Sink)
	}
	// Its own state: on overlays/bucket's, the tables would start from the
	// checkpoints of the Parquet output and miss what it holds.
	bucket := render(t, "overlays/bucket")
	for _, cm := range bucket.configMaps {
		if b := parseConfig(t, "overlays/bucket", []byte(cm.Data["syncd.yaml"]), schedulingEnv); b != nil && b.State.URL == cfg.State.URL {
			t.Errorf("state.url %s is overlays/bucket's: give the Iceberg sink a state of its own", cfg.State.URL)
		}
	}
	env := r.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
	if !hasSecretEnv(env, "SYNCD_ICEBERG_CREDENTIAL") {
		t.Errorf("no env SYNCD_ICEBERG_CREDENTIAL from a secretKeyRef")
	}
}

// TestIcebergPostgresVariant makes the switch deploy/k8s/README.md
// documents ("Iceberg tables") in a copy of the tree: in syncd.yaml the
// commented postgres type and uri in place of the rest ones, and in
// catalog-credential.yaml PGPASSWORD in place of SYNCD_ICEBERG_CREDENTIAL;
// the result must pass every check.
func TestIcebergPostgresVariant(t *testing.T) {
	tmp := t.TempDir()
	for _, d := range []string{"base", "overlays/bucket", "overlays/iceberg"} {
		copyDir(t, d, filepath.Join(tmp, d))
	}
	dir := filepath.Join(tmp, "overlays/iceberg")
	cfgFile := filepath.Join(dir, "syncd.yaml")
	raw := string(readFile(t, cfgFile))
	pg := regexp.MustCompile(`(?m)^\s*#\s+type: postgres\n\s*#\s+uri: (\S+)`).FindStringSubmatch(raw)
	if pg == nil {
		t.Fatal("overlays/iceberg/syncd.yaml shows no commented `type: postgres` and `uri:` to switch to")
	}
	active := regexp.MustCompile(`(?m)^(\s+)type: rest\n\s+uri: \S+\n`)
	if !active.MatchString(raw) {
		t.Fatal("overlays/iceberg/syncd.yaml: no `type: rest` followed by `uri:` to replace")
	}
	raw = active.ReplaceAllString(raw, "${1}type: postgres\n${1}uri: "+pg[1]+"\n")
	writeFile(t, cfgFile, raw)
	credFile := filepath.Join(dir, "catalog-credential.yaml")
	cred := string(readFile(t, credFile))
	if strings.Count(cred, "SYNCD_ICEBERG_CREDENTIAL") < 2 {
		t.Fatal("overlays/iceberg/catalog-credential.yaml does not set SYNCD_ICEBERG_CREDENTIAL from its key")
	}
	writeFile(t, credFile, strings.ReplaceAll(cred, "SYNCD_ICEBERG_CREDENTIAL", "PGPASSWORD"))

	r := render(t, dir)
	example := parseConfig(t, "configs/syncd.example.yaml", uncommentScheduling(t, readFile(t, "../../configs/syncd.example.yaml")), schedulingEnv)
	if len(r.cronJobs) != 1 {
		t.Fatalf("%d CronJobs, want 1", len(r.cronJobs))
	}
	cfg := checkCronJob(t, r, r.cronJobs[0], example)
	if cfg == nil {
		t.FailNow()
	}
	if c := cfg.Sink.Iceberg.Catalog; c.Type != "postgres" || !strings.HasPrefix(c.URI, "postgres://") {
		t.Errorf("catalog %+v, want the postgres one", c)
	}
	env := r.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
	if !hasSecretEnv(env, "PGPASSWORD") || hasSecretEnv(env, "SYNCD_ICEBERG_CREDENTIAL") {
		t.Errorf("env %v: want PGPASSWORD from a secretKeyRef and no SYNCD_ICEBERG_CREDENTIAL", env)
	}
	// The loader refuses the password in the URI that the README forbids.
	bad := regexp.MustCompile(`(?m)^(\s+uri: postgres://[^@:/]+)@`).ReplaceAllString(raw, "${1}:hunter2@")
	if bad == raw {
		t.Fatal("no active catalog uri postgres://user@... to put a password in")
	}
	if _, err := config.Parse("syncd.yaml", []byte(bad), func(k string) (string, bool) { return "x", true }); err == nil || !strings.Contains(err.Error(), "PGPASSWORD") {
		t.Errorf("a password in catalog.uri: err %v, want a refusal naming PGPASSWORD", err)
	}
}

func hasSecretEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return true
		}
	}
	return false
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			writeFile(t, filepath.Join(to, e.Name()), string(readFile(t, filepath.Join(from, e.Name()))))
		}
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
