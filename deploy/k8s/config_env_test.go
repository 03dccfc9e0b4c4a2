package k8s_test

import (
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/syncd-dev/syncd/internal/config"
)

// TestEveryContainerCanLoadItsConfig: every container that runs
// syncd with --config must be able to load that config with the
// environment the container actually has: a ${VAR} the config reads and the
// container does not set makes syncd exit 2 before it does anything.
func TestEveryContainerCanLoadItsConfig(t *testing.T) {
	for _, dir := range kustomizations(t) {
		r := render(t, dir)
		var pods []struct {
			where string
			ps    corev1.PodSpec
		}
		add := func(where string, ps corev1.PodSpec) {
			pods = append(pods, struct {
				where string
				ps    corev1.PodSpec
			}{where, ps})
		}
		for _, cj := range r.cronJobs {
			add(dir+" CronJob "+cj.Name, cj.Spec.JobTemplate.Spec.Template.Spec)
		}
		for _, j := range r.jobs {
			add(dir+" Job "+j.Name, j.Spec.Template.Spec)
		}
		for _, d := range r.deployments {
			add(dir+" Deployment "+d.Name, d.Spec.Template.Spec)
		}
		for _, p := range pods {
			for i := range p.ps.Containers {
				c := &p.ps.Containers[i]
				cfgPath, ok := flag(splitFlags(c.Args), "--config")
				if !ok {
					continue
				}
				where := p.where + " container " + c.Name
				m, v := mountOf(&p.ps, c, cfgPath)
				if m == nil || v == nil || v.ConfigMap == nil {
					t.Errorf("%s: --config %s is not on a ConfigMap volume", where, cfgPath)
					continue
				}
				cm := r.configMaps[v.ConfigMap.Name]
				if cm == nil {
					t.Errorf("%s: ConfigMap %s not rendered", where, v.ConfigMap.Name)
					continue
				}
				key := strings.TrimPrefix(path.Clean(cfgPath), path.Clean(m.MountPath)+"/")
				raw, ok := cm.Data[key]
				if !ok {
					t.Errorf("%s: ConfigMap %s has no key %s", where, cm.Name, key)
					continue
				}
				set := map[string]bool{}
				for _, e := range c.Env {
					set[e.Name] = true
				}
				if _, err := config.Parse(key, []byte(raw), func(k string) (string, bool) {
					if set[k] {
						return "value-of-" + k, true
					}
					return "", false
				}); err != nil {
					t.Errorf("%s (args %q): syncd cannot load its config with this container's environment, and exits 2 at start: %v", where, c.Args, err)
				}
			}
		}
	}
}
