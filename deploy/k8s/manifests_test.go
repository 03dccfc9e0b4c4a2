package k8s_test

// Renders every kustomization under deploy/k8s in-process (the same engine as
// `kubectl apply -k`), decodes every object strictly into the typed
// Kubernetes API structs, so a misspelt or misplaced field fails here rather
// than at `kubectl apply`, and checks what an operator relies on: one writer
// per state file (or, for the sharded overlays, a state in a bucket shared on
// purpose and shards that add up), hardened pods, the API keys from Secrets
// only, and a config that syncd itself accepts and that writes only to
// volumes or buckets.

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/syncd-dev/syncd/internal/config"
)

const (
	secretName = "syncd-forms-api" // created by the operator, never rendered
	secretKey  = "FORMS_API_KEY"
	uid        = 65532 // distroless "nonroot", the Dockerfile's USER
	container  = "syncd"
)

// The kustomizations that must exist (more are rendered if found), and the
// one workload each runs. Exactly one workload per kustomization; without a
// shared state (state.shared) it runs one pod at a time, since a state file
// has one writer. The sharded overlays must share their state in a bucket.
var want = map[string]struct {
	kind   string
	shared bool
}{
	"base":                      {"CronJob", false},
	"overlays/daemon":           {"Deployment", false},
	"overlays/bucket":           {"CronJob", false},
	"overlays/iceberg":          {"CronJob", false},
	"overlays/sharded-backfill": {"Job", true},
	"overlays/sharded-daemon":   {"Deployment", true},
}

// kinds maps apiVersion/kind to the typed struct it must decode into. A kind
// missing here fails the test: add it with its k8s.io/api type.
var kinds = map[string]func() any{
	"v1/ConfigMap":             func() any { return &corev1.ConfigMap{} },
	"v1/ServiceAccount":        func() any { return &corev1.ServiceAccount{} },
	"v1/PersistentVolumeClaim": func() any { return &corev1.PersistentVolumeClaim{} },
	"v1/Service":               func() any { return &corev1.Service{} },
	"batch/v1/CronJob":         func() any { return &batchv1.CronJob{} },
	"batch/v1/Job":             func() any { return &batchv1.Job{} },
	"apps/v1/Deployment":       func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget": func() any {
		return &policyv1.PodDisruptionBudget{}
	},
}

type rendered struct {
	dir         string
	configMaps  map[string]*corev1.ConfigMap
	pvcs        map[string]*corev1.PersistentVolumeClaim
	accounts    map[string]*corev1.ServiceAccount
	services    []*corev1.Service
	cronJobs    []*batchv1.CronJob
	jobs        []*batchv1.Job
	deployments []*appsv1.Deployment
	pdbs        []*policyv1.PodDisruptionBudget
}

func TestManifests(t *testing.T) {
	dirs := kustomizations(t)
	for d := range want {
		if !slices.Contains(dirs, d) {
			t.Errorf("kustomization %s/kustomization.yaml is missing", d)
		}
	}
	example := parseConfig(t, "configs/syncd.example.yaml", uncommentScheduling(t, readFile(t, "../../configs/syncd.example.yaml")), schedulingEnv)
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			r := render(t, dir)
			n := len(r.cronJobs) + len(r.jobs) + len(r.deployments)
			if n != 1 {
				t.Fatalf("%d syncd workloads (CronJobs + Jobs + Deployments), want exactly 1: one writer per state file, or one workload sharing it", n)
			}
			var kind string
			var cfg *config.Config
			for _, cj := range r.cronJobs {
				kind, cfg = "CronJob", checkCronJob(t, r, cj, example)
			}
			for _, j := range r.jobs {
				kind, cfg = "Job", checkJob(t, r, j, example)
			}
			for _, d := range r.deployments {
				kind, cfg = "Deployment", checkDeployment(t, r, d, example)
			}
			w, ok := want[dir]
			if ok && w.kind != kind {
				t.Errorf("a %s, want a %s", kind, w.kind)
			}
			switch {
			case ok && cfg != nil && w.shared && !cfg.State.Shared:
				t.Errorf("the config does not set state.shared: true: the %s's pods share the state", kind)
			case ok && cfg != nil && !w.shared && cfg.State.Shared:
				t.Errorf("the config sets state.shared: true, but this %s is the single writer of its state", kind)
			}
			if len(r.pdbs) > 0 && len(r.deployments) == 0 {
				t.Errorf("a PodDisruptionBudget without a Deployment to protect")
			}
		})
	}
}

// kustomizations lists every directory under deploy/k8s holding a
// kustomization, relative to it.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch e.Name() {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
			dirs = append(dirs, filepath.ToSlash(filepath.Dir(p)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return dirs
}

// render runs kustomize (load restrictions on: no file outside the root) and
// decodes every object strictly into its typed struct.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{dir: dir, configMaps: map[string]*corev1.ConfigMap{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, accounts: map[string]*corev1.ServiceAccount{}}
	for _, res := range m.Resources() {
		raw, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		id := res.GetApiVersion() + "/" + res.GetKind()
		where := id + " " + res.GetName()
		if res.GetKind() == "Secret" {
			t.Errorf("%s: the API key Secret must be created by the operator, not rendered from the repository", where)
			continue
		}
		mk, ok := kinds[id]
		if !ok {
			t.Errorf("%s: no typed struct for %s in manifests_test.go", where, id)
			continue
		}
		obj := mk()
		if err := decodeStrict(raw, obj); err != nil {
			t.Errorf("%s does not decode strictly into %T: %v", where, obj, err)
			continue
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.PersistentVolumeClaim:
			r.pvcs[o.Name] = o
		case *corev1.ServiceAccount:
			r.accounts[o.Name] = o
		case *corev1.Service:
			r.services = append(r.services, o)
		case *batchv1.CronJob:
			r.cronJobs = append(r.cronJobs, o)
		case *batchv1.Job:
			r.jobs = append(r.jobs, o)
		case *appsv1.Deployment:
			r.deployments = append(r.deployments, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return r
}

// decodeStrict fails on unknown and duplicate fields (sigs.k8s.io/yaml goes
// through JSON with DisallowUnknownFields, as the API server's strict field
// validation does).
func decodeStrict(raw []byte, obj any) error {
	return k8syaml.UnmarshalStrict(raw, obj)
}

func TestStrictDecodeCatchesTypos(t *testing.T) {
	good := "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  schedule: '* * * * *'\n  concurrencyPolicy: Forbid\n" +
		"  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - name: c\n            securityContext: {readOnlyRootFilesystem: true}\n"
	if err := decodeStrict([]byte(good), &batchv1.CronJob{}); err != nil {
		t.Fatalf("a valid CronJob fails to decode: %v", err)
	}
	for _, typo := range []string{"concurrencyPolicy: Forbid", "readOnlyRootFilesystem"} {
		bad := strings.Replace(good, typo, strings.Replace(typo, "o", "0", 1), 1)
		if err := decodeStrict([]byte(bad), &batchv1.CronJob{}); err == nil {
			t.Errorf("a misspelt %q decodes without error", typo)
		}
	}
}

// ---- workloads ----------------------------------------------------------

func checkCronJob(t *testing.T, r *rendered, cj *batchv1.CronJob, example *config.Config) *config.Config {
	where := "CronJob " + cj.Name
	s := cj.Spec
	if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("%s: concurrencyPolicy %q, want Forbid (one writer per state file)", where, s.ConcurrencyPolicy)
	}
	if s.StartingDeadlineSeconds == nil || *s.StartingDeadlineSeconds < 60 {
		t.Errorf("%s: startingDeadlineSeconds must be set, at least 60 (the controller checks every 10s)", where)
	}
	if s.SuccessfulJobsHistoryLimit == nil || s.FailedJobsHistoryLimit == nil {
		t.Errorf("%s: successfulJobsHistoryLimit and failedJobsHistoryLimit must be set", where)
	}
	js := s.JobTemplate.Spec
	if js.BackoffLimit == nil {
		t.Errorf("%s: backoffLimit must be set", where)
	}
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds <= 0 {
		t.Errorf("%s: activeDeadlineSeconds must be set", where)
	}
	if rp := js.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		t.Errorf("%s: restartPolicy %q, want Never or OnFailure", where, rp)
	}
	c, args, cfg := checkPod(t, r, where, &js.Template, example)
	if c == nil {
		return cfg
	}
	checkOnce(t, where, &js.Template.Spec, c, args)
	if _, ok := flag(args, "--shard"); ok {
		t.Errorf("%s: args %q: --shard in a CronJob: one Job runs every account; shard with an Indexed Job (overlays/sharded-backfill)", where, c.Args)
	}
	return cfg
}

// checkOnce: `syncd once ... --summary FILE`, the summary on an emptyDir.
func checkOnce(t *testing.T, where string, ps *corev1.PodSpec, c *corev1.Container, args []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "once" {
		t.Errorf("%s: args %q, want `once ...`", where, c.Args)
	}
	if p, ok := flag(args, "--summary"); !ok {
		t.Errorf("%s: args %q: no --summary FILE", where, c.Args)
	} else {
		writable(t, where, ps, c, p, "emptyDir")
	}
}

// checkJob: a one-off Job. Without a shared state it is one pod at a time;
// with one (overlays/sharded-backfill) it is N shards of one pass: Indexed,
// completions = parallelism = N, and `once --shard /N`, each pod's shard
// being its JOB_COMPLETION_INDEX.
func checkJob(t *testing.T, r *rendered, j *batchv1.Job, example *config.Config) *config.Config {
	where := "Job " + j.Name
	s := j.Spec
	if s.BackoffLimit == nil && s.BackoffLimitPerIndex == nil {
		t.Errorf("%s: backoffLimit or backoffLimitPerIndex must be set", where)
	}
	if s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds <= 0 {
		t.Errorf("%s: activeDeadlineSeconds must be set", where)
	}
	rp := s.Template.Spec.RestartPolicy
	switch {
	case (s.BackoffLimitPerIndex != nil || s.PodFailurePolicy != nil) && rp != corev1.RestartPolicyNever:
		t.Errorf("%s: restartPolicy %q, want Never (backoffLimitPerIndex and podFailurePolicy require it)", where, rp)
	case rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure:
		t.Errorf("%s: restartPolicy %q, want Never or OnFailure", where, rp)
	}
	if s.BackoffLimitPerIndex != nil && (s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion) {
		t.Errorf("%s: backoffLimitPerIndex needs completionMode: Indexed", where)
	}
	if pfp := s.PodFailurePolicy; pfp != nil {
		for i, rule := range pfp.Rules {
			if rule.Action == batchv1.PodFailurePolicyActionFailIndex && s.BackoffLimitPerIndex == nil {
				t.Errorf("%s: podFailurePolicy.rules[%d]: FailIndex needs backoffLimitPerIndex", where, i)
			}
			if e := rule.OnExitCodes; e != nil && (e.ContainerName == nil || *e.ContainerName != container) {
				t.Errorf("%s: podFailurePolicy.rules[%d]: onExitCodes must name containerName %s (syncd's exit codes)", where, i, container)
			}
		}
	}
	c, args, cfg := checkPod(t, r, where, &s.Template, example)
	if c == nil {
		return cfg
	}
	checkOnce(t, where, &s.Template.Spec, c, args)
	one := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	shard, hasShard := flag(args, "--shard")
	if cfg == nil || !cfg.State.Shared {
		if one(s.Parallelism) != 1 {
			t.Errorf("%s: parallelism %d: one writer per state file (to shard, share a state in a bucket: state.url and state.shared: true)", where, one(s.Parallelism))
		}
		if hasShard {
			t.Errorf("%s: --shard without state.shared: true: shards share the state", where)
		}
		return cfg
	}
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("%s: completionMode must be Indexed: each shard's pod gets its index as JOB_COMPLETION_INDEX", where)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism {
		t.Errorf("%s: completions %d and parallelism %d must be set and equal: N shards, all at once", where, one(s.Completions), one(s.Parallelism))
	}
	if !hasShard {
		t.Errorf("%s: args %q: no --shard /N", where, c.Args)
	} else if i, nStr, ok := strings.Cut(shard, "/"); !ok || i != "" {
		t.Errorf("%s: --shard %q, want /N: the shard's index comes from JOB_COMPLETION_INDEX", where, shard)
	} else if n, err := strconv.Atoi(nStr); err != nil || n < 1 {
		t.Errorf("%s: --shard %q: N is not a count", where, shard)
	} else if int32(n) != one(s.Completions) {
		t.Errorf("%s: --shard /%d but completions %d: shards would be missed or run twice", where, n, one(s.Completions))
	}
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" {
			t.Errorf("%s: env JOB_COMPLETION_INDEX overrides the index the Job gives each pod", where)
		}
	}
	return cfg
}

func checkDeployment(t *testing.T, r *rendered, d *appsv1.Deployment, example *config.Config) *config.Config {
	where := "Deployment " + d.Name
	tpl := &d.Spec.Template
	if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, tpl.Labels) || len(d.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("%s: selector %v does not match the template's labels %v", where, d.Spec.Selector, tpl.Labels)
	}
	c, args, cfg := checkPod(t, r, where, tpl, example)
	if c == nil || cfg == nil {
		return cfg
	}
	if cfg.State.Shared {
		checkSharedDeployment(t, r, where, d)
	} else {
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("%s: replicas must be exactly 1 (one writer per state file)", where)
		}
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("%s: strategy %q, want Recreate (a rolling update would run two writers)", where, d.Spec.Strategy.Type)
		}
		checkBackupSidecar(t, r, where, tpl, c)
	}
	if len(args) == 0 || args[0] != "run" {
		t.Errorf("%s: args %q, want `run ...`", where, c.Args)
	}
	// The metrics port: server.addr, the container port, the probes, the
	// scrape annotation and the Service all agree.
	host, portStr, err := net.SplitHostPort(cfg.Server.Addr)
	port, _ := strconv.Atoi(portStr)
	if err != nil || port == 0 {
		t.Fatalf("%s: server.addr %q has no port", where, cfg.Server.Addr)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("%s: server.addr %q listens on %s only: the kubelet's probes and Prometheus cannot reach it; use 0.0.0.0", where, cfg.Server.Addr, host)
	}
	var cport *corev1.ContainerPort
	for i := range c.Ports {
		if int(c.Ports[i].ContainerPort) == port {
			cport = &c.Ports[i]
		}
	}
	if cport == nil {
		t.Fatalf("%s: no containerPort %d (server.addr %s)", where, port, cfg.Server.Addr)
	}
	probe := func(name string, p *corev1.Probe, wantPath string) {
		switch {
		case p == nil:
			t.Errorf("%s: no %s probe", where, name)
		case p.HTTPGet == nil:
			t.Errorf("%s: %s probe is not an httpGet", where, name)
		case p.HTTPGet.Path != wantPath:
			t.Errorf("%s: %s probe path %q, want %s", where, name, p.HTTPGet.Path, wantPath)
		case !portIs(p.HTTPGet.Port, cport):
			t.Errorf("%s: %s probe port %s, want the metrics port %d", where, name, p.HTTPGet.Port.String(), port)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	if c.StartupProbe != nil {
		probe("startup", c.StartupProbe, "/healthz")
	}
	a := tpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != portStr || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("%s: pod annotations %v, want prometheus.io/scrape \"true\", port %q, path /metrics", where, a, portStr)
	}
	found := false
	for _, s := range r.services {
		if len(s.Spec.Selector) == 0 || !subset(s.Spec.Selector, tpl.Labels) {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if portIs(sp.TargetPort, cport) || (sp.TargetPort.IntValue() == 0 && sp.TargetPort.StrVal == "" && int(sp.Port) == port) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("%s: no Service selects the pod and targets the metrics port %d", where, port)
	}
	return cfg
}

// checkSharedDeployment: N replicas of `syncd run` sharing the state
// (overlays/sharded-daemon) are spread over nodes, drained one at a time,
// and keep no state-backup sidecar each.
func checkSharedDeployment(t *testing.T, r *rendered, where string, d *appsv1.Deployment) {
	t.Helper()
	tpl := &d.Spec.Template
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("%s: replicas must be more than 1: the state is shared (state.shared: true) to spread its accounts over replicas", where)
	}
	selects := func(ls *metav1.LabelSelector) bool {
		if ls == nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		return err == nil && !sel.Empty() && sel.Matches(labels.Set(tpl.Labels))
	}
	pdb := false
	for _, p := range r.pdbs {
		if !selects(p.Spec.Selector) {
			continue
		}
		pdb = true
		if p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.String() != "1" {
			t.Errorf("%s: PodDisruptionBudget %s: want maxUnavailable 1 (and no minAvailable): one replica's accounts move at a time", where, p.Name)
		}
	}
	if !pdb {
		t.Errorf("%s: no PodDisruptionBudget selects the pods", where)
	}
	spread := false
	if a := tpl.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if w.Weight > 0 && w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && selects(w.PodAffinityTerm.LabelSelector) {
				spread = true
			}
		}
	}
	if !spread {
		t.Errorf("%s: no preferred pod anti-affinity on %s selecting the pods: replicas may share a node, and lose their accounts together", where, corev1.LabelHostname)
	}
	for _, c := range tpl.Spec.Containers {
		if c.Name == "state-backup" {
			t.Errorf("%s: a state-backup sidecar in every replica copies the same shared state N times: turn on the bucket's Object Versioning instead", where)
		}
	}
}

// checkPod checks what every syncd pod needs and returns the syncd
// container, its args and its parsed config.
func checkPod(t *testing.T, r *rendered, where string, tpl *corev1.PodTemplateSpec, example *config.Config) (*corev1.Container, []string, *config.Config) {
	t.Helper()
	ps := &tpl.Spec
	psc := ps.SecurityContext
	if psc == nil {
		t.Errorf("%s: no pod securityContext", where)
		psc = &corev1.PodSecurityContext{}
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot must be true", where)
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != uid {
		t.Errorf("%s: pod securityContext.runAsUser must be %d", where, uid)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext.seccompProfile must be RuntimeDefault", where)
	}
	if ps.ServiceAccountName == "" || r.accounts[ps.ServiceAccountName] == nil {
		t.Errorf("%s: serviceAccountName %q is not a rendered ServiceAccount", where, ps.ServiceAccountName)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false (syncd does not call the Kubernetes API)", where)
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Errorf("%s: host namespaces must not be shared", where)
	}
	var syncd *corev1.Container
	all := append(append([]corev1.Container{}, ps.InitContainers...), ps.Containers...)
	for i := range all {
		c := &all[i]
		checkContainer(t, where+" container "+c.Name, ps, c)
		if c.Name == container && i >= len(ps.InitContainers) {
			syncd = &ps.Containers[i-len(ps.InitContainers)]
		}
	}
	if syncd == nil {
		t.Errorf("%s: no container named %s", where, container)
		return nil, nil, nil
	}
	where += " container " + syncd.Name
	if len(syncd.Command) != 0 {
		t.Errorf("%s: command %q overrides the image's ENTRYPOINT [/syncd]; use args", where, syncd.Command)
	}
	if !strings.Contains(syncd.Image, "/") {
		t.Errorf("%s: image %q is the unset placeholder: set images: in the kustomization", where, syncd.Image)
	}
	args := splitFlags(syncd.Args)

	// The API key: only from the Secret.
	envNames := map[string]bool{}
	var keyEnv *corev1.EnvVar
	for i, e := range syncd.Env {
		envNames[e.Name] = true
		if e.Name == secretKey {
			keyEnv = &syncd.Env[i]
		}
		if e.Value != "" && regexp.MustCompile(`(?i)key|token|secret|password|credential`).MatchString(e.Name) {
			t.Errorf("%s: env %s has a literal value: take it from a Secret", where, e.Name)
		}
	}
	if len(syncd.EnvFrom) > 0 {
		t.Errorf("%s: envFrom hides which variables syncd gets: list them in env", where)
	}
	switch {
	case keyEnv == nil:
		// Required unless the config has an accounts list (below).
	case keyEnv.ValueFrom == nil || keyEnv.ValueFrom.SecretKeyRef == nil:
		t.Errorf("%s: env %s must come from secretKeyRef", where, secretKey)
	default:
		ref := keyEnv.ValueFrom.SecretKeyRef
		if ref.Name != secretName || ref.Key != secretKey {
			t.Errorf("%s: env %s from Secret %s key %s, want Secret %s key %s (README)", where, secretKey, ref.Name, ref.Key, secretName, secretKey)
		}
		if ref.Optional != nil && *ref.Optional {
			t.Errorf("%s: the API key Secret must not be optional", where)
		}
	}

	// The config: --config names a file of a mounted, rendered ConfigMap.
	cfgPath, ok := flag(args, "--config")
	if !ok {
		t.Errorf("%s: args %q: no --config FILE", where, syncd.Args)
		return syncd, args, nil
	}
	m, v := mountOf(ps, syncd, cfgPath)
	if m == nil || v.ConfigMap == nil {
		t.Errorf("%s: --config %s is not on a ConfigMap volume", where, cfgPath)
		return syncd, args, nil
	}
	if !m.ReadOnly {
		t.Errorf("%s: the config mount %s must be readOnly", where, m.MountPath)
	}
	key := strings.TrimPrefix(strings.TrimPrefix(cfgPath, m.MountPath), "/")
	for _, it := range v.ConfigMap.Items {
		if it.Path == key {
			key = it.Key
		}
	}
	cm := r.configMaps[v.ConfigMap.Name]
	if cm == nil {
		t.Errorf("%s: volume %s names ConfigMap %s, not rendered (a generator name not rewritten?)", where, v.Name, v.ConfigMap.Name)
		return syncd, args, nil
	}
	raw, ok := cm.Data[key]
	if !ok {
		t.Errorf("%s: --config %s: ConfigMap %s has no key %s", where, cfgPath, cm.Name, key)
		return syncd, args, nil
	}
	noLiteralKey(t, where+": ConfigMap "+cm.Name+" "+key, []byte(raw), ps, syncd)
	schedulingFromSecret(t, where+": ConfigMap "+cm.Name+" "+key, []byte(raw), syncd)
	cfg := parseConfig(t, "ConfigMap "+cm.Name+" "+key, []byte(raw), envNames)
	if cfg == nil {
		return syncd, args, nil
	}
	if keyEnv == nil && !cfg.MultiAccount() {
		t.Errorf("%s: no env %s", where, secretKey)
	}
	if cfg.State.Shared && cfg.State.URL == "" {
		t.Errorf("%s: state.shared: true without state.url: only a state in a bucket can be shared", where)
	}
	sameAsExample(t, where, cfg, example)
	if ps.TerminationGracePeriodSeconds == nil || float64(*ps.TerminationGracePeriodSeconds) <= cfg.Sync.ShutdownGrace.D().Seconds() {
		t.Errorf("%s: terminationGracePeriodSeconds must exceed sync.shutdown_grace %v, or the batch in flight is SIGKILLed", where, cfg.Sync.ShutdownGrace.D())
	}

	// Everything syncd writes is on a volume or in a bucket: the root
	// filesystem is read-only.
	if cfg.State.URL == "" {
		writable(t, where, ps, syncd, cfg.State.Path, "persistentVolumeClaim")
	}
	if cfg.Sink.Type == "parquet" && !strings.Contains(cfg.Sink.Parquet.Path, "://") {
		writable(t, where, ps, syncd, cfg.Sink.Parquet.Path+"/x", "persistentVolumeClaim")
	}
	if cfg.State.URL != "" {
		checkBucket(t, r, where, ps, cfg)
	}
	checkIceberg(t, r, where, ps, syncd, cfg)
	for _, vol := range ps.Volumes {
		if pvc := vol.PersistentVolumeClaim; pvc != nil {
			c := r.pvcs[pvc.ClaimName]
			if c == nil {
				t.Errorf("%s: volume %s claims %s, not rendered", where, vol.Name, pvc.ClaimName)
				continue
			}
			if !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOnce) && !slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOncePod) {
				t.Errorf("%s: PVC %s access modes %v, want ReadWriteOnce or ReadWriteOncePod", where, c.Name, c.Spec.AccessModes)
			}
			if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
				t.Errorf("%s: PVC %s requests no storage", where, c.Name)
			}
		}
	}
	return syncd, args, cfg
}

func checkContainer(t *testing.T, where string, ps *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: no securityContext", where)
		sc = &corev1.SecurityContext{}
	}
	psc := ps.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	// Container settings override the pod's.
	nonRoot, user, seccomp := psc.RunAsNonRoot, psc.RunAsUser, psc.SeccompProfile
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s: runAsNonRoot must be true", where)
	}
	if user == nil || *user != uid {
		t.Errorf("%s: runs as user %v, want %d", where, user, uid)
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile must be RuntimeDefault", where)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem must be true", where)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation must be false", where)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: must not be privileged", where)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities must drop ALL and add none", where)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
		if req.IsZero() || lim.IsZero() {
			t.Errorf("%s: resources.requests and limits must set %s", where, res)
		} else if req.Cmp(lim) > 0 {
			t.Errorf("%s: %s request %s above its limit %s", where, res, req.String(), lim.String())
		}
	}
	writable(t, where, ps, c, "/tmp/x", "emptyDir")
}

// checkBucket: with the state in a bucket the pod needs no volume, and on
// Cloud Storage signs in to Google Cloud with Workload Identity rather than
// a key.
func checkBucket(t *testing.T, r *rendered, where string, ps *corev1.PodSpec, cfg *config.Config) {
	t.Helper()
	scheme, _, _ := strings.Cut(cfg.State.URL, "://")
	if !slices.Contains([]string{"gs", "s3", "azblob"}, scheme) {
		t.Errorf("%s: state.url %q is not a gs://, s3:// or azblob:// URL", where, cfg.State.URL)
	}
	for _, v := range ps.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("%s: volume %s claims %s, but the state and output are in a bucket", where, v.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	if len(r.pvcs) > 0 {
		t.Errorf("%s: PersistentVolumeClaims rendered with nothing to hold", where)
	}
	if scheme == "gs" {
		workloadIdentity(t, r, where, ps)
	}
}

// workloadIdentity: a pod that reads and writes Cloud Storage signs in
// with Workload Identity, never with a key file.
func workloadIdentity(t *testing.T, r *rendered, where string, ps *corev1.PodSpec) {
	t.Helper()
	sa := r.accounts[ps.ServiceAccountName]
	if sa == nil || !strings.HasSuffix(sa.Annotations["iam.gke.io/gcp-service-account"], ".iam.gserviceaccount.com") {
		t.Errorf("%s: ServiceAccount %s has no iam.gke.io/gcp-service-account annotation (Workload Identity)", where, ps.ServiceAccountName)
	}
	if ps.NodeSelector["iam.gke.io/gke-metadata-server-enabled"] != "true" {
		t.Errorf("%s: no nodeSelector iam.gke.io/gke-metadata-server-enabled: \"true\" (Workload Identity needs the GKE metadata server)", where)
	}
	for _, c := range ps.Containers {
		for _, e := range c.Env {
			if e.Name == "GOOGLE_APPLICATION_CREDENTIALS" {
				t.Errorf("%s: GOOGLE_APPLICATION_CREDENTIALS points at a key file: Workload Identity needs none", where)
			}
		}
	}
}

// ---- config -------------------------------------------------------------

// parseConfig runs syncd's own loader (strict keys, ${ENV} expansion,
// validation). Only the container's env variables are defined, so a
// reference to anything else fails as it would in the pod.
func parseConfig(t *testing.T, name string, raw []byte, env map[string]bool) *config.Config {
	t.Helper()
	cfg, err := config.Parse(name, raw, func(k string) (string, bool) {
		if env[k] {
			return "value-of-" + k, true
		}
		return "", false
	})
	if err != nil {
		t.Errorf("syncd rejects the config: %v", err)
		return nil
	}
	return cfg
}

// noLiteralKey: source.api_key must be exactly ${VAR} (no default: that would
// be a key in the ConfigMap), and VAR must be the Secret-fed variable. Each
// account of an accounts list has its key either as ${VAR}, VAR set from a
// Secret (secretKeyRef, not optional), or in a file (api_key_file) of a
// read-only Secret volume.
func noLiteralKey(t *testing.T, where string, raw []byte, ps *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	var doc struct {
		Source struct {
			APIKey *string `yaml:"api_key"`
		} `yaml:"source"`
		Accounts []struct {
			Name       string  `yaml:"name"`
			APIKey     *string `yaml:"api_key"`
			APIKeyFile *string `yaml:"api_key_file"`
		} `yaml:"accounts"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	ref := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)
	if doc.Source.APIKey != nil {
		m := ref.FindStringSubmatch(*doc.Source.APIKey)
		if m == nil {
			t.Errorf("%s: source.api_key is not a bare ${VARIABLE} reference: a literal key (or a ${VAR:-default}) would be stored in a ConfigMap", where)
		} else if m[1] != secretKey {
			t.Errorf("%s: source.api_key reads $%s, but the Secret feeds $%s", where, m[1], secretKey)
		}
	} // else the default, ${FORMS_API_KEY}, or an accounts list
	for i, a := range doc.Accounts {
		key := fmt.Sprintf("accounts[%d] (%s)", i, a.Name)
		if a.APIKey != nil {
			m := ref.FindStringSubmatch(*a.APIKey)
			if m == nil {
				t.Errorf("%s: %s.api_key is not a bare ${VARIABLE} reference: a literal key (or a ${VAR:-default}) would be stored in a ConfigMap", where, key)
				continue
			}
			var env *corev1.EnvVar
			for j := range c.Env {
				if c.Env[j].Name == m[1] {
					env = &c.Env[j]
				}
			}
			switch {
			case env == nil:
				t.Errorf("%s: %s.api_key reads $%s, which the container does not set", where, key, m[1])
			case env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil:
				t.Errorf("%s: %s.api_key reads $%s, which must come from a secretKeyRef", where, key, m[1])
			case env.ValueFrom.SecretKeyRef.Optional != nil && *env.ValueFrom.SecretKeyRef.Optional:
				t.Errorf("%s: %s.api_key reads $%s from an optional Secret key", where, key, m[1])
			}
		}
		if a.APIKeyFile != nil {
			f := *a.APIKeyFile
			m, v := mountOf(ps, c, f)
			switch {
			case !path.IsAbs(f):
				t.Errorf("%s: %s.api_key_file %q is relative: it would be resolved against the config's folder", where, key, f)
			case m == nil || v == nil || v.Secret == nil:
				t.Errorf("%s: %s.api_key_file %q is not on a Secret volume", where, key, f)
			case !m.ReadOnly:
				t.Errorf("%s: %s.api_key_file %q: the Secret mount %s must be readOnly", where, key, f, m.MountPath)
			case v.Secret.Optional != nil && *v.Secret.Optional:
				t.Errorf("%s: %s.api_key_file %q: the Secret volume %s must not be optional", where, key, f, v.Name)
			case len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(it corev1.KeyToPath) bool {
				return path.Join(m.MountPath, it.Path) == path.Clean(f)
			}):
				t.Errorf("%s: %s.api_key_file %q is not among the items of the Secret volume %s", where, key, f, v.Name)
			}
		}
	}
}

// sameAsExample: the Kubernetes config mirrors configs/syncd.example.yaml;
// only what a pod needs differently may differ.
func sameAsExample(t *testing.T, where string, got, example *config.Config) {
	t.Helper()
	if example == nil {
		return
	}
	e := *example
	e.State.Path, e.Sink.Parquet.Path, e.Log.Format, e.Server.Addr = got.State.Path, got.Sink.Parquet.Path, got.Log.Format, got.Server.Addr
	e.State.URL = got.State.URL     // the bucket overlay
	if got.Sink.Type == "iceberg" { // overlays/iceberg: checked by checkIceberg
		e.Sink.Type, e.Sink.Iceberg = got.Sink.Type, got.Sink.Iceberg
	}
	e.State.Shared = got.State.Shared
	// The scheduling section: absent, or the one the example shows (commented
	// out there), with a start date of the pod's own.
	if got.Scheduling == nil {
		e.Scheduling = nil
	} else if e.Scheduling != nil {
		sc := *e.Scheduling
		sc.Bookings.StartDate = got.Scheduling.Bookings.StartDate
		e.Scheduling = &sc
	}
	if got.MultiAccount() { // the sharded overlays: configs/accounts.example.yaml
		e.Source.APIKey, e.Forms, e.Accounts = got.Source.APIKey, got.Forms, got.Accounts
	}
	g, w := reflect.ValueOf(*got), reflect.ValueOf(e)
	for i := range g.NumField() {
		if !g.Type().Field(i).IsExported() {
			continue // bookkeeping of the parser (line numbers), not configuration
		}
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("%s: %s differs from configs/syncd.example.yaml (only state.path, state.url, state.shared, sink.parquet.path, sink.type iceberg with its sink.iceberg, log.format, server.addr and an accounts list may):\n got  %+v\n want %+v",
				where, g.Type().Field(i).Tag.Get("yaml"), g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
	if got.Log.Format != "json" {
		t.Errorf("%s: log.format %q, want json in a pod", where, got.Log.Format)
	}
}

// ---- the scheduling API's OAuth client -----------------------------------

// schedulingSecret is the Secret the scheduling section's client id and
// secrets come from (secrets.example.yaml).
const schedulingSecret = "syncd-scheduling"

// schedulingEnv are the variables a parsed config may read.
var schedulingEnv = map[string]bool{secretKey: true, "SCHEDULING_CLIENT_ID": true, "SCHEDULING_CLIENT_SECRET": true, "SCHEDULING_CLIENT_SECRET_NEXT": true}

// uncommentScheduling is the example config with its commented-out
// scheduling section taken in, so that the pods' section is compared with
// the one the example documents.
func uncommentScheduling(t *testing.T, raw []byte) []byte {
	t.Helper()
	lines := strings.Split(string(raw), "\n")
	in := false
	found := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "# scheduling:"):
			lines[i], in, found = strings.TrimPrefix(l, "# "), true, true
		case in && strings.HasPrefix(l, "#   "):
			lines[i] = strings.TrimPrefix(l, "# ")
		default:
			in = false
		}
	}
	if !found {
		t.Fatal("configs/syncd.example.yaml shows no commented-out scheduling section")
	}
	return []byte(strings.Join(lines, "\n"))
}

// schedulingFromSecret: a scheduling section's client_id, client_secret
// and client_secret_next are bare ${VAR} (or ${VAR:-}: empty for a public
// client) references, each VAR set from the Secret syncd-scheduling, key
// VAR; the client id's key is not optional.
func schedulingFromSecret(t *testing.T, where string, raw []byte, c *corev1.Container) {
	t.Helper()
	var doc struct {
		Scheduling map[string]any `yaml:"scheduling"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if doc.Scheduling == nil {
		return
	}
	ref := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)(:-)?\}$`)
	for _, k := range []string{"client_id", "client_secret", "client_secret_next"} {
		v, _ := doc.Scheduling[k].(string)
		m := ref.FindStringSubmatch(v)
		if m == nil {
			t.Errorf("%s: scheduling.%s %q is not a bare ${VARIABLE} reference: take it from the Secret %s through env", where, k, v, schedulingSecret)
			continue
		}
		var env *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == m[1] {
				env = &c.Env[i]
			}
		}
		switch {
		case env == nil:
			t.Errorf("%s: scheduling.%s reads $%s, which the container does not set", where, k, m[1])
		case env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil:
			t.Errorf("%s: scheduling.%s reads $%s, which must come from a secretKeyRef", where, k, m[1])
		case env.ValueFrom.SecretKeyRef.Name != schedulingSecret || env.ValueFrom.SecretKeyRef.Key != m[1]:
			t.Errorf("%s: $%s from Secret %s key %s, want Secret %s key %s", where, m[1], env.ValueFrom.SecretKeyRef.Name, env.ValueFrom.SecretKeyRef.Key, schedulingSecret, m[1])
		case k == "client_id" && (m[2] != "" || env.ValueFrom.SecretKeyRef.Optional != nil && *env.ValueFrom.SecretKeyRef.Optional):
			t.Errorf("%s: scheduling.client_id must not be optional (no default, the Secret key required)", where)
		}
	}
}

// TestSecretsExample: secrets.example.yaml decodes strictly into Secrets
// and defines every Secret key the single-state workloads read.
func TestSecretsExample(t *testing.T) {
	defined := map[string]bool{}
	for i, doc := range strings.Split(string(readFile(t, "secrets.example.yaml")), "\n---\n") {
		var s corev1.Secret
		if err := decodeStrict([]byte(doc), &s); err != nil {
			t.Fatalf("secrets.example.yaml document %d does not decode strictly into a Secret: %v", i, err)
		}
		if s.Kind != "Secret" || s.Name == "" {
			t.Fatalf("secrets.example.yaml document %d: kind %q name %q", i, s.Kind, s.Name)
		}
		for k := range s.StringData {
			defined[s.Name+"/"+k] = true
		}
	}
	for _, dir := range []string{"base", "overlays/daemon", "overlays/bucket", "overlays/iceberg"} {
		r := render(t, dir)
		var pods []corev1.PodSpec
		for _, cj := range r.cronJobs {
			pods = append(pods, cj.Spec.JobTemplate.Spec.Template.Spec)
		}
		for _, d := range r.deployments {
			pods = append(pods, d.Spec.Template.Spec)
		}
		for _, ps := range pods {
			for _, c := range append(ps.InitContainers, ps.Containers...) {
				for _, e := range c.Env {
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						continue
					}
					ref := e.ValueFrom.SecretKeyRef
					optional := ref.Optional != nil && *ref.Optional
					if !defined[ref.Name+"/"+ref.Key] && !optional {
						t.Errorf("%s container %s: env %s reads Secret %s key %s, which secrets.example.yaml does not define", dir, c.Name, e.Name, ref.Name, ref.Key)
					}
				}
			}
		}
	}
}

// ---- helpers ------------------------------------------------------------

// splitFlags turns --flag=value into --flag value.
func splitFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
			out = append(out, k, v)
			continue
		}
		out = append(out, a)
	}
	return out
}

func flag(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// mountOf finds the mount (deepest first) holding the file p.
func mountOf(ps *corev1.PodSpec, c *corev1.Container, p string) (*corev1.VolumeMount, *corev1.Volume) {
	p = path.Clean(p)
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := path.Clean(m.MountPath)
		if strings.HasPrefix(p, mp+"/") && (best == nil || len(mp) > len(path.Clean(best.MountPath))) {
			best = m
		}
	}
	if best == nil {
		return nil, nil
	}
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == best.Name {
			return best, &ps.Volumes[i]
		}
	}
	return best, nil
}

// writable checks that the file p is on a writable volume of the given kind.
func writable(t *testing.T, where string, ps *corev1.PodSpec, c *corev1.Container, p, kind string) {
	t.Helper()
	if !path.IsAbs(p) {
		t.Errorf("%s: %s is relative: the working directory is on the read-only root filesystem", where, p)
		return
	}
	m, v := mountOf(ps, c, p)
	if m == nil || v == nil {
		t.Errorf("%s: %s is on the read-only root filesystem: put it on a volume (%s)", where, p, kind)
		return
	}
	ok := (kind == "emptyDir" && v.EmptyDir != nil) || (kind == "persistentVolumeClaim" && v.PersistentVolumeClaim != nil)
	if !ok || m.ReadOnly {
		t.Errorf("%s: %s is on volume %s, want a writable %s", where, p, v.Name, kind)
	}
}

func portIs(p intstr.IntOrString, cp *corev1.ContainerPort) bool {
	if p.Type == intstr.String {
		return p.StrVal != "" && p.StrVal == cp.Name
	}
	return p.IntVal == cp.ContainerPort
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDockerfile checks what the manifests assume of the image.
func TestDockerfile(t *testing.T) {
	df := string(readFile(t, "../../Dockerfile"))
	var froms []string
	for _, l := range strings.Split(df, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.EqualFold(f[0], "FROM") {
			froms = append(froms, l)
		}
	}
	if len(froms) < 2 || !strings.Contains(froms[len(froms)-1], "gcr.io/distroless/static-debian12:nonroot") {
		t.Errorf("Dockerfile: want a multi-stage build ending FROM gcr.io/distroless/static-debian12:nonroot, got %q", froms)
	}
	for _, s := range []string{
		"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/syncd",
		fmt.Sprintf("USER %d", uid), `ENTRYPOINT ["/syncd"]`,
	} {
		if !strings.Contains(df, s) {
			t.Errorf("Dockerfile: no %q", s)
		}
	}
	di := string(readFile(t, "../../.dockerignore"))
	for _, s := range []string{"!go.mod", "!go.sum", "!cmd", "!internal"} {
		if !strings.Contains(di, s) {
			t.Errorf(".dockerignore: the build needs %s", strings.TrimPrefix(s, "!"))
		}
	}
}

// checkBackupSidecar: the daemon's state-backup sidecar runs `syncd state
// backup DEST --keep N --every D` with the syncd image and config, and its
// DEST, N and D come from a rendered ConfigMap with values syncd accepts.
func checkBackupSidecar(t *testing.T, r *rendered, where string, tpl *corev1.PodTemplateSpec, syncd *corev1.Container) {
	t.Helper()
	var sc *corev1.Container
	for i := range tpl.Spec.Containers {
		if tpl.Spec.Containers[i].Name == "state-backup" {
			sc = &tpl.Spec.Containers[i]
		}
	}
	if sc == nil {
		t.Errorf("%s: no state-backup sidecar: the daemon keeps no backups of its state", where)
		return
	}
	where += " container state-backup"
	if sc.Image != syncd.Image {
		t.Errorf("%s: image %q, want the syncd image %q", where, sc.Image, syncd.Image)
	}
	if len(sc.Args) < 3 || sc.Args[0] != "state" || sc.Args[1] != "backup" {
		t.Fatalf("%s: args %q, want `state backup DEST ...`", where, sc.Args)
	}
	args := splitFlags(sc.Args)
	cfgPath, ok := flag(args, "--config")
	if m, _ := mountOf(&tpl.Spec, sc, cfgPath); !ok || m == nil {
		t.Errorf("%s: --config %q is not mounted", where, cfgPath)
	}
	// $(VAR) in args expand from env; each must come from the ConfigMap.
	values := map[string]string{}
	for _, e := range sc.Env {
		if ref := e.ValueFrom; ref != nil && ref.ConfigMapKeyRef != nil {
			cm := r.configMaps[ref.ConfigMapKeyRef.Name]
			if cm == nil {
				t.Errorf("%s: env %s from ConfigMap %s, not rendered", where, e.Name, ref.ConfigMapKeyRef.Name)
				continue
			}
			v, ok := cm.Data[ref.ConfigMapKeyRef.Key]
			if !ok {
				t.Errorf("%s: env %s: ConfigMap %s has no key %s", where, e.Name, cm.Name, ref.ConfigMapKeyRef.Key)
			}
			values[e.Name] = v
		}
	}
	expand := func(s string) string {
		return regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			v, ok := values[name]
			if !ok {
				t.Errorf("%s: %s is not set from the ConfigMap", where, m)
			}
			return v
		})
	}
	dest := expand(sc.Args[2])
	if !strings.HasSuffix(strings.SplitN(dest, "?", 2)[0], "/") {
		t.Errorf("%s: DEST %q must be a folder or prefix ending in '/' for --keep", where, dest)
	}
	keep, _ := flag(args, "--keep")
	if n, err := strconv.Atoi(expand(keep)); err != nil || n < 1 {
		t.Errorf("%s: --keep %q is not a count of 1 or more", where, expand(keep))
	}
	every, _ := flag(args, "--every")
	if d, err := time.ParseDuration(expand(every)); err != nil || d < time.Hour {
		t.Errorf("%s: --every %q is not a duration of an hour or more", where, expand(every))
	}
	if !strings.Contains(dest, "://") {
		writable(t, where, &tpl.Spec, sc, dest+"x", "persistentVolumeClaim")
	}
}

// TestShardedConfigsAgree: the sharded Job and daemon serve the same
// accounts from the same shared state, so their configs are one file, held
// twice (kustomize reads no file outside its root).
func TestShardedConfigsAgree(t *testing.T) {
	a := readFile(t, "overlays/sharded-backfill/syncd.yaml")
	b := readFile(t, "overlays/sharded-daemon/syncd.yaml")
	if string(a) != string(b) {
		t.Errorf("overlays/sharded-backfill/syncd.yaml and overlays/sharded-daemon/syncd.yaml differ: keep them the same")
	}
}
