// Package check validates deploy/'s manifests offline: each is decoded
// strictly (unknown fields and wrong types refused) into the Kubernetes
// API's own Go types, then checked for what the deployment relies on. It
// is its own module so that the main one does not depend on k8s.io.
// (kubeconform validates against JSON schemas it downloads; this needs
// nothing but the module proxy.)
package check

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

type manifests struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	secret     *corev1.Secret
}

func load(t *testing.T) manifests {
	t.Helper()
	files, _ := filepath.Glob("../*.yaml")
	examples, _ := filepath.Glob("../example/*.yaml")
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/")
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				m.deployment = &appsv1.Deployment{}
				obj = m.deployment
			case "v1 Service":
				m.service = &corev1.Service{}
				obj = m.service
			case "policy/v1 PodDisruptionBudget":
				m.pdb = &policyv1.PodDisruptionBudget{}
				obj = m.pdb
			case "autoscaling/v2 HorizontalPodAutoscaler":
				m.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
				obj = m.hpa
			case "v1 Secret":
				m.secret = &corev1.Secret{}
				obj = m.secret
			default:
				t.Fatalf("%s #%d: unexpected %s %s", f, i, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s #%d (%s): %v", f, i, tm.Kind, err)
			}
		}
	}
	if m.deployment == nil || m.service == nil || m.pdb == nil || m.hpa == nil || m.secret == nil {
		t.Fatalf("want a Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler and Secret: %+v", m)
	}
	return m
}

func TestManifests(t *testing.T) {
	m := load(t)
	d := m.deployment
	pod := d.Spec.Template.Spec
	labels := d.Spec.Template.Labels
	for k, v := range d.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not match its pods", k, v)
		}
	}
	for k, v := range m.service.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service's selector %s=%s matches no pod", k, v)
		}
	}
	for k, v := range m.pdb.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the PodDisruptionBudget's selector %s=%s matches no pod", k, v)
		}
	}
	if ref := m.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("the HPA scales %s %s, not the Deployment", ref.Kind, ref.Name)
	}
	if len(m.hpa.Spec.Metrics) == 0 || m.hpa.Spec.Metrics[0].Resource == nil || m.hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("the HPA does not scale on CPU: %+v", m.hpa.Spec.Metrics)
	}

	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("the pod may run as root: %+v", sc)
	}
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod's seccomp profile is not RuntimeDefault")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	csc := c.SecurityContext
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context: %+v", csc)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe is not GET /healthz: %+v", name, p)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests missing: %+v", c.Resources.Requests)
	}

	// The grace period covers the preStop pause and the drain.
	var drain time.Duration
	var keyFile string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
			var err error
			if drain, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
		if v, ok := strings.CutPrefix(a, "--session-key-file="); ok {
			keyFile = v
		}
	}
	if drain == 0 {
		t.Fatal("no --drain-timeout in the container's args (the default, 2m, is longer than the grace period)")
	}
	var pause time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < drain+pause {
		t.Errorf("terminationGracePeriodSeconds %v does not cover preStop %v + --drain-timeout %v", g, pause, drain)
	}

	// The store's URL and the session key come from the Secret.
	var storeFromSecret bool
	for _, e := range c.Env {
		if e.Name == "AIRLOCK_SESSION_STORE" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == m.secret.Name {
			storeFromSecret = m.secret.StringData[e.ValueFrom.SecretKeyRef.Key] != ""
		}
	}
	if !storeFromSecret {
		t.Error("AIRLOCK_SESSION_STORE is not taken from the Secret")
	}
	var keyFromSecret bool
	for _, vm := range c.VolumeMounts {
		if keyFile == "" || !strings.HasPrefix(keyFile, vm.MountPath+"/") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.Secret != nil && v.Secret.SecretName == m.secret.Name {
				for _, it := range v.Secret.Items {
					keyFromSecret = keyFromSecret || vm.MountPath+"/"+it.Path == keyFile && m.secret.StringData[it.Key] != ""
				}
			}
		}
	}
	if !keyFromSecret {
		t.Errorf("--session-key-file=%s is not a key of the Secret mounted", keyFile)
	}
	// A read-only root: what serve writes (its cache) is a volume.
	var cache bool
	for _, e := range c.VolumeMounts {
		cache = cache || e.MountPath == "/cache"
	}
	if !cache {
		t.Error("no volume at /cache (AIRLOCK_CACHE_DIR): serve cannot write its compiled code")
	}
}

// TestQueueDepthAutoscaler: queue-metric/ scales the same Deployment on
// CPU and on the gauge the servers export, by the name they export it
// under, and the adapter rule serves that name per pod.
func TestQueueDepthAutoscaler(t *testing.T) {
	m := load(t)
	read := func(path string, obj any) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var hpa autoscalingv2.HorizontalPodAutoscaler
	read("../queue-metric/hpa.yaml", &hpa)
	if hpa.Kind != "HorizontalPodAutoscaler" || hpa.Name != m.hpa.Name {
		t.Errorf("queue-metric/hpa.yaml is %s %q; it must replace the plain HPA %q", hpa.Kind, hpa.Name, m.hpa.Name)
	}
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != m.deployment.Name {
		t.Errorf("it scales %s %s, not the Deployment", ref.Kind, ref.Name)
	}
	var cpu, queue bool
	for _, metric := range hpa.Spec.Metrics {
		switch {
		case metric.Resource != nil && metric.Resource.Name == corev1.ResourceCPU:
			cpu = true
		case metric.Pods != nil && metric.Pods.Metric.Name == "airlock_queue_depth" &&
			metric.Pods.Target.Type == autoscalingv2.AverageValueMetricType && metric.Pods.Target.AverageValue != nil:
			queue = true
		}
	}
	if !cpu || !queue {
		t.Errorf("want CPU and per-pod airlock_queue_depth metrics: %+v", hpa.Spec.Metrics)
	}
	src, err := os.ReadFile("../../server/server.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(`Name: "airlock_queue_depth"`)) {
		t.Error("the servers no longer export airlock_queue_depth under that name")
	}

	var cm corev1.ConfigMap
	read("../queue-metric/adapter-rules.yaml", &cm)
	var rules struct {
		Rules []struct {
			SeriesQuery string `json:"seriesQuery"`
			Resources   struct {
				Overrides map[string]struct {
					Resource string `json:"resource"`
				} `json:"overrides"`
			} `json:"resources"`
			Name struct {
				Matches string `json:"matches"`
				As      string `json:"as"`
			} `json:"name"`
			MetricsQuery string `json:"metricsQuery"`
		} `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &rules); err != nil {
		t.Fatalf("adapter rules: %v", err)
	}
	served := false
	for _, r := range rules.Rules {
		if strings.Contains(r.SeriesQuery, "airlock_queue_depth") && r.Name.As == "airlock_queue_depth" &&
			r.Resources.Overrides["pod"].Resource == "pod" && r.MetricsQuery != "" {
			served = true
		}
	}
	if !served {
		t.Errorf("no adapter rule serves airlock_queue_depth per pod: %+v", rules)
	}
	if m.deployment.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Error("the pods are not marked for scraping, so the gauge never reaches the adapter")
	}
}
