package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// objects is one rendering of the chart, decoded.
type objects struct {
	deployment      *appsv1.Deployment
	services        []*corev1.Service
	pvcs            []*corev1.PersistentVolumeClaim
	pdb             *policyv1.PodDisruptionBudget
	hpa             *autoscalingv2.HorizontalPodAutoscaler
	ingress         *networkingv1.Ingress
	networkPolicy   *networkingv1.NetworkPolicy
	serviceMonitor  *serviceMonitor
	kinds           []string
	serviceAccounts int
}

// serviceMonitor is the part of the Prometheus Operator's
// monitoring.coreos.com/v1 ServiceMonitor the chart writes; its types are
// not in k8s.io/api, and decoding into this strictly still catches a typo.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector  struct{ MatchLabels map[string]string } `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// loadChart loads helm/spacefix as Helm does.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load("helm/spacefix")
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return ch
}

// renderChart renders the chart with vals over its defaults, as
// `helm template spacefix deploy/helm/spacefix --namespace mcp` would.
func renderChart(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch := loadChart(t)
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: "spacefix", Namespace: "mcp", IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.RenderWithContext(context.Background(), ch, rv)
}

// decode decodes every object of a rendering strictly: a field the API
// types do not have fails the test, as kubectl apply --validate=strict would.
func decode(t *testing.T, files map[string]string) objects {
	t.Helper()
	var o objects
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s #%d is not YAML: %v\n%s", name, i, err, doc)
			}
			into, err := o.slot(head.APIVersion, head.Kind)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s (%s) does not decode strictly into its API type: %v\n%s", name, head.Kind, err, doc)
			}
			o.kinds = append(o.kinds, head.Kind)
		}
	}
	return o
}

// slot returns where an object of this kind decodes to.
func (o *objects) slot(apiVersion, kind string) (any, error) {
	want := map[string]string{
		"Deployment": "apps/v1", "Service": "v1", "PersistentVolumeClaim": "v1", "ServiceAccount": "v1",
		"PodDisruptionBudget": "policy/v1", "HorizontalPodAutoscaler": "autoscaling/v2",
		"Ingress": "networking.k8s.io/v1", "NetworkPolicy": "networking.k8s.io/v1",
		"ServiceMonitor": "monitoring.coreos.com/v1",
	}[kind]
	if want == "" || want != apiVersion {
		return nil, fmt.Errorf("unexpected object %s %s", apiVersion, kind)
	}
	switch kind {
	case "Deployment":
		o.deployment = new(appsv1.Deployment)
		return o.deployment, nil
	case "Service":
		s := new(corev1.Service)
		o.services = append(o.services, s)
		return s, nil
	case "PersistentVolumeClaim":
		p := new(corev1.PersistentVolumeClaim)
		o.pvcs = append(o.pvcs, p)
		return p, nil
	case "ServiceAccount":
		o.serviceAccounts++
		return new(corev1.ServiceAccount), nil
	case "PodDisruptionBudget":
		o.pdb = new(policyv1.PodDisruptionBudget)
		return o.pdb, nil
	case "HorizontalPodAutoscaler":
		o.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
		return o.hpa, nil
	case "Ingress":
		o.ingress = new(networkingv1.Ingress)
		return o.ingress, nil
	case "NetworkPolicy":
		o.networkPolicy = new(networkingv1.NetworkPolicy)
		return o.networkPolicy, nil
	default:
		o.serviceMonitor = new(serviceMonitor)
		return o.serviceMonitor, nil
	}
}

// clusterValues are values-cluster.yaml, the example for three gateways.
func clusterValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("helm/values-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("values-cluster.yaml: %v", err)
	}
	return v
}

// with returns a copy of vals with the dotted key set.
func with(vals map[string]any, key string, value any) map[string]any {
	out := deepCopy(vals)
	m := out
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = value
	return out
}

func deepCopy(v map[string]any) map[string]any {
	var b bytes.Buffer
	out := map[string]any{}
	if v == nil {
		return out
	}
	j, _ := yaml.Marshal(v)
	b.Write(j)
	yaml.Unmarshal(b.Bytes(), &out)
	return out
}
