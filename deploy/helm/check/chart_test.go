package check

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "../cctrace"

// valueSets are the value files the chart is rendered with: none (the defaults), and every
// file in its ci/ directory.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	sets := map[string][]string{"defaults": nil}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no value sets in the chart's ci/ directory")
	}
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = []string{"--values", f}
	}
	return sets
}

// newObject returns an empty object of the Go type the API server decodes apiVersion/kind into,
// or nil for a kind the chart is not expected to render.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		return &gwapiv1.HTTPRoute{}
	case "gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy":
		return &egv1a1.BackendTrafficPolicy{}
	}
	return nil
}

// rendered is one value set's output: every object, decoded into its API type.
type rendered struct {
	objects []any
	raw     map[string][]byte // "Kind/name" → its YAML
}

// render runs helm template on the chart with args and decodes every object strictly.
func render(t *testing.T, helm string, args ...string) rendered {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"template", "cctrace", chartDir, "--namespace", "team-tools"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr.String())
	}
	r := rendered{raw: map[string][]byte{}}
	for _, doc := range bytes.Split(stdout.Bytes(), []byte("\n---")) {
		doc = bytes.TrimSpace(doc)
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		obj := newObject(meta.APIVersion, meta.Kind)
		if obj == nil {
			t.Errorf("%s %s/%s: not a kind the chart should render", meta.APIVersion, meta.Kind, meta.Metadata.Name)
			continue
		}
		// Strict: a field the API type does not have, or a field given twice, is an error, as
		// a server-side field validation of Strict would make it.
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s %s/%s does not match the API schema: %v\n%s", meta.APIVersion, meta.Kind, meta.Metadata.Name, err, doc)
			continue
		}
		r.objects = append(r.objects, obj)
		r.raw[meta.Kind+"/"+meta.Metadata.Name] = doc
	}
	return r
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func find[T any](r rendered) []T {
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestChartRendersValidObjects renders every value set, decodes every object strictly into its
// API type, and checks what the chart promises: probes and graceful termination that match
// cctrace's flags, a locked-down pod, session affinity wherever traffic enters, and the
// optional objects where they were asked for.
func TestChartRendersValidObjects(t *testing.T) {
	helm := require(t, "CCTRACE_HELM_BIN", "helm")
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, helm, args...)
			var proxy *appsv1.Deployment
			for _, d := range find[*appsv1.Deployment](r) {
				if d.Spec.Template.Labels["app.kubernetes.io/component"] == "proxy" {
					proxy = d
				}
				checkPodLockedDown(t, d)
			}
			if proxy == nil {
				t.Fatal("no cctrace Deployment")
			}
			checkProxyPod(t, proxy)
			checkServices(t, r)
			if len(find[*policyv1.PodDisruptionBudget](r)) != 1 {
				t.Error("want one PodDisruptionBudget")
			}
			for _, ing := range find[*networkingv1.Ingress](r) {
				if got := ing.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]; got != "$http_x_claude_code_session_id" {
					t.Errorf("Ingress %s: upstream-hash-by %q, want the session header", ing.Name, got)
				}
			}
			for _, p := range find[*egv1a1.BackendTrafficPolicy](r) {
				lb := p.Spec.LoadBalancer
				if lb == nil || lb.Type != egv1a1.ConsistentHashLoadBalancerType || lb.ConsistentHash == nil ||
					lb.ConsistentHash.Type != egv1a1.HeadersConsistentHashType || len(lb.ConsistentHash.Headers) != 1 ||
					!strings.EqualFold(lb.ConsistentHash.Headers[0].Name, "X-Claude-Code-Session-Id") {
					t.Errorf("BackendTrafficPolicy %s: load balancer %+v, want consistent hashing on X-Claude-Code-Session-Id", p.Name, lb)
				}
			}
			if len(find[*gwapiv1.HTTPRoute](r)) != len(find[*egv1a1.BackendTrafficPolicy](r)) {
				t.Error("an HTTPRoute comes with its BackendTrafficPolicy")
			}
			for _, sm := range find[*monitoringv1.ServiceMonitor](r) {
				if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
					t.Errorf("ServiceMonitor %s: endpoints %+v, want the metrics port", sm.Name, sm.Spec.Endpoints)
					continue
				}
				checkJobRelabeled(t, sm)
			}
			checkCollectorConfigs(t, r)
		})
	}
}

// checkProxyPod checks the cctrace pod against the flags it passes.
func checkProxyPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment %s: %d containers, want 1", d.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %+v: want GET /healthz on the metrics port", p)
		}
	}
	grace := -1
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--shutdown-grace="); ok {
			dur, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("--shutdown-grace=%s: %v", v, err)
			}
			grace = int(dur.Seconds())
		}
	}
	if grace < 0 {
		t.Fatalf("args %v: no --shutdown-grace", c.Args)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep: the load balancer must stop sending before cctrace stops")
	}
	preStop := int(c.Lifecycle.PreStop.Sleep.Seconds)
	if spec.TerminationGracePeriodSeconds == nil || int(*spec.TerminationGracePeriodSeconds) <= preStop+grace {
		t.Errorf("terminationGracePeriodSeconds %v: want more than the preStop sleep (%d s) and --shutdown-grace (%d s)",
			spec.TerminationGracePeriodSeconds, preStop, grace)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, a := range c.Args {
		for flag, port := range map[string]string{"--listen=": "proxy", "--metrics-listen=": "metrics"} {
			if v, ok := strings.CutPrefix(a, flag); ok && !strings.HasSuffix(v, ":"+strconv.Itoa(int(ports[port]))) {
				t.Errorf("%s%s, but the %s port is %d", flag, v, port, ports[port])
			}
		}
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
	}
	for _, a := range c.Args {
		for _, flag := range []string{"--pricing=", "--tls-cert=", "--tls-key=", "--identity-secret-file=", "--directory=", "--budgets=", "--access-file="} {
			if v, ok := strings.CutPrefix(a, flag); ok && !mounts[filepath.Dir(v)] {
				t.Errorf("%s%s: nothing is mounted at %s", flag, v, filepath.Dir(v))
			}
		}
	}
}

// checkPodLockedDown checks that every pod runs as non-root on a read-only root filesystem
// without privileges.
func checkPodLockedDown(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("Deployment %s: the pod may run as root", d.Name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("Deployment %s container %s: security context %+v, want read-only root, no privilege escalation, every capability dropped", d.Name, c.Name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("Deployment %s container %s: want a CPU request and a memory limit", d.Name, c.Name)
		}
	}
}

// checkServices checks that every Service selects the pods of a rendered Deployment and that
// its target ports are ports those pods name.
func checkServices(t *testing.T, r rendered) {
	t.Helper()
	deployments := find[*appsv1.Deployment](r)
	for _, s := range find[*corev1.Service](r) {
		var match *appsv1.Deployment
		for _, d := range deployments {
			if selects(s.Spec.Selector, d.Spec.Template.Labels) {
				match = d
			}
		}
		if match == nil {
			t.Errorf("Service %s selects no rendered pods", s.Name)
			continue
		}
		named := map[string]bool{}
		for _, c := range match.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				named[p.Name] = true
			}
		}
		for _, p := range s.Spec.Ports {
			if !named[p.TargetPort.String()] {
				t.Errorf("Service %s port %s: target %s is no port of %s", s.Name, p.Name, p.TargetPort.String(), match.Name)
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkCollectorConfigs validates the collector configs the chart renders with the collector
// that ocb builds from tools/otelcol (the components of the image the chart runs).
func checkCollectorConfigs(t *testing.T, r rendered) {
	t.Helper()
	var configs []*corev1.ConfigMap
	for _, cm := range find[*corev1.ConfigMap](r) {
		if strings.Contains(cm.Name, "-collector-") {
			configs = append(configs, cm)
		}
	}
	if len(configs) == 0 {
		return
	}
	otelcol := require(t, "CCTRACE_OTELCOL_BIN", "the ocb collector (tools/otelcol)")
	for _, cm := range configs {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(otelcol, "validate", "--config", path).CombinedOutput()
		if err != nil {
			t.Errorf("ConfigMap %s: the collector refuses its config: %v\n%s\n%s", cm.Name, err, out, cm.Data["config.yaml"])
		}
	}
}

// require returns the executable named by the environment variable env. When it is unset the
// test is skipped, or failed under CI=true.
func require(t *testing.T, env, what string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		msg := fmt.Sprintf("%s not available: set %s (scripts/tools.sh builds it)", what, env)
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}
