package check

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// proxyDeployment returns the cctrace Deployment of r.
func proxyDeployment(t *testing.T, r rendered) *appsv1.Deployment {
	t.Helper()
	for _, d := range find[*appsv1.Deployment](r) {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == "proxy" {
			return d
		}
	}
	t.Fatal("no cctrace Deployment")
	return nil
}

// mountedFrom returns, for each mount path of the cctrace container, the volume behind it.
func mountedFrom(d *appsv1.Deployment) map[string]corev1.Volume {
	vols := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	out := map[string]corev1.Volume{}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		out[m.MountPath] = vols[m.Name]
	}
	return out
}

// TestIdentitySecretShared: every replica reads one fingerprint secret from a Secret, the
// chart's by default, or the one named by identity.existingSecret.
func TestIdentitySecretShared(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")

	r := render(t, helm)
	secrets := find[*corev1.Secret](r)
	if len(secrets) != 1 {
		t.Fatalf("defaults: %d Secrets, want the chart's identity secret", len(secrets))
	}
	s := secrets[0]
	if len(s.Data["identity-secret"]) < 32 {
		t.Errorf("Secret %s: identity-secret is %d bytes, cctrace wants 32 or more", s.Name, len(s.Data["identity-secret"]))
	}
	if s.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("Secret %s: not kept on uninstall", s.Name)
	}
	d := proxyDeployment(t, r)
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--identity-secret-file=/etc/cctrace/identity/identity-secret") {
		t.Errorf("args %v: no --identity-secret-file", args)
	}
	if v := mountedFrom(d)["/etc/cctrace/identity"]; v.Secret == nil || v.Secret.SecretName != s.Name {
		t.Errorf("/etc/cctrace/identity: volume %+v, want Secret %s", v, s.Name)
	}

	r = render(t, helm, "--set", "identity.existingSecret=team-fingerprints", "--set", "identity.key=secret")
	if n := len(find[*corev1.Secret](r)); n != 0 {
		t.Errorf("with identity.existingSecret: %d Secrets rendered, want none", n)
	}
	d = proxyDeployment(t, r)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--identity-secret-file=/etc/cctrace/identity/secret") {
		t.Errorf("args %v: want --identity-secret-file on the key", d.Spec.Template.Spec.Containers[0].Args)
	}
	if v := mountedFrom(d)["/etc/cctrace/identity"]; v.Secret == nil || v.Secret.SecretName != "team-fingerprints" {
		t.Errorf("/etc/cctrace/identity: volume %+v, want Secret team-fingerprints", v)
	}
}

// TestHistory: by default each replica keeps its history in memory (its root filesystem is
// read-only: a file there would fail, and say so in an alert); with history.existingSecret, in
// the PostgreSQL whose URL the Secret holds, out of the args.
func TestHistory(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")
	c := proxyDeployment(t, render(t, helm)).Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--history=memory") {
		t.Errorf("defaults: args %v, want --history=memory", c.Args)
	}
	c = proxyDeployment(t, render(t, helm, "--set", "history.existingSecret=team-history")).Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--history") {
			t.Errorf("with history.existingSecret: args have %s", a)
		}
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "CCTRACE_HISTORY" {
			found = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name == "team-history" && e.ValueFrom.SecretKeyRef.Key == "url"
		}
	}
	if !found {
		t.Errorf("with history.existingSecret: env %+v, want CCTRACE_HISTORY from Secret team-history, key url", c.Env)
	}
}

// TestTeamFiles: directory, budgets and access files are mounted read-only and passed as flags.
func TestTeamFiles(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")

	r := render(t, helm,
		"--set", "directory.content=people: {}",
		"--set", "budgets.existingConfigMap=team-budgets",
		"--set", "budgets.enforce=true",
		"--set", "access.existingSecret=turns-access",
		"--set-json", `extraVolumes=[{"name":"scratch","emptyDir":{}}]`,
		"--set-json", `extraVolumeMounts=[{"name":"scratch","mountPath":"/scratch"}]`,
	)
	d := proxyDeployment(t, r)
	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{
		"--directory=/etc/cctrace/directory/directory.yaml",
		"--budgets=/etc/cctrace/budgets/budgets.yaml",
		"--enforce-budgets",
		"--access-file=/etc/cctrace/access/access.yaml",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v: no %s", c.Args, want)
		}
	}
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/etc/cctrace/") && !m.ReadOnly {
			t.Errorf("%s is mounted writable", m.MountPath)
		}
	}
	from := mountedFrom(d)
	if v := from["/etc/cctrace/directory"]; v.ConfigMap == nil || v.ConfigMap.Name != "cctrace-directory" {
		t.Errorf("/etc/cctrace/directory: volume %+v, want the chart's ConfigMap", v)
	}
	if v := from["/etc/cctrace/budgets"]; v.ConfigMap == nil || v.ConfigMap.Name != "team-budgets" {
		t.Errorf("/etc/cctrace/budgets: volume %+v, want ConfigMap team-budgets", v)
	}
	if v := from["/etc/cctrace/access"]; v.Secret == nil || v.Secret.SecretName != "turns-access" {
		t.Errorf("/etc/cctrace/access: volume %+v, want Secret turns-access", v)
	}
	if v := from["/scratch"]; v.EmptyDir == nil {
		t.Errorf("/scratch: volume %+v, want the extra emptyDir", v)
	}
	var directory *corev1.ConfigMap
	for _, cm := range find[*corev1.ConfigMap](r) {
		if cm.Name == "cctrace-directory" {
			directory = cm
		}
		if cm.Name == "cctrace-budgets" {
			t.Error("budgets.existingConfigMap set, but the chart renders a budgets ConfigMap too")
		}
	}
	if directory == nil || strings.TrimSpace(directory.Data["directory.yaml"]) != "people: {}" {
		t.Errorf("directory ConfigMap %+v: want the content under directory.yaml", directory)
	}

	renderFails(t, helm, "budgets.enforce needs", "--set", "budgets.enforce=true")
}

// TestGatewayRefusesTLSBackend: the HTTPRoute speaks plain HTTP to the backend; with cctrace
// serving HTTPS the chart refuses rather than render a route that cannot work.
func TestGatewayRefusesTLSBackend(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")
	renderFails(t, helm, "gateway.enabled with tls.enabled",
		"--set", "gateway.enabled=true", "--set-json", `gateway.parentRefs=[{"name":"eg"}]`,
		"--set", "tls.enabled=true", "--set", "tls.secretName=cctrace-tls")
}

// TestClusterDomain: the collector gateway finds the samplers under the cluster's DNS domain.
func TestClusterDomain(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")
	for domain, args := range map[string][]string{
		"cluster.local": {"--set", "collector.enabled=true"},
		"corp.example":  {"--set", "collector.enabled=true", "--set", "clusterDomain=corp.example"},
	} {
		r := render(t, helm, args...)
		want := "hostname: cctrace-collector-sampler.team-tools.svc." + domain + "\n"
		found := false
		for _, cm := range find[*corev1.ConfigMap](r) {
			if strings.Contains(cm.Data["config.yaml"], want) {
				found = true
			}
		}
		if !found {
			t.Errorf("clusterDomain %s: no collector config with %q", domain, strings.TrimSpace(want))
		}
	}
}

// TestServiceMonitorJob: the ServiceMonitor scrapes under job="cctrace", which the alerts select,
// whatever the release is called.
func TestServiceMonitorJob(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")
	r := render(t, helm, "--set", "serviceMonitor.enabled=true")
	sms := find[*monitoringv1.ServiceMonitor](r)
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	checkJobRelabeled(t, sms[0])
}

// checkJobRelabeled checks that sm's endpoint sets job to "cctrace".
func checkJobRelabeled(t *testing.T, sm *monitoringv1.ServiceMonitor) {
	t.Helper()
	for _, rc := range sm.Spec.Endpoints[0].RelabelConfigs {
		if rc.TargetLabel == "job" && rc.Replacement != nil && *rc.Replacement == "cctrace" &&
			(rc.Action == "" || strings.EqualFold(rc.Action, "replace")) {
			return
		}
	}
	t.Errorf("ServiceMonitor %s: no relabeling setting job to cctrace (the alerts select job=\"cctrace\")", sm.Name)
}

// renderFails checks that helm template refuses args with a message containing want.
func renderFails(t *testing.T, helm, want string, args ...string) {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"template", "cctrace", chartDir, "--namespace", "team-tools"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Errorf("helm template %v rendered; want it refused with %q", args, want)
	} else if !strings.Contains(stderr.String(), want) {
		t.Errorf("helm template %v: %s; want %q", args, stderr.String(), want)
	}
}
