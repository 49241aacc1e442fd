package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// pgValues are the least that runs gateways on PostgreSQL.
var pgValues = map[string]any{
	"postgres":  map[string]any{"existingSecret": "pg"},
	"secretKey": map[string]any{"existingSecret": "sk"},
}

// TestChartRenders renders the chart for every values set people use and
// decodes every object strictly; then checks what holds for all of them:
// the probes, a non-root read-only container, the drain, and no secret
// outside a Secret.
func TestChartRenders(t *testing.T) {
	cluster := clusterValues(t)
	for _, c := range []struct {
		name      string
		vals      map[string]any
		replicas  int32 // 0: the HPA decides
		postgres  bool
		wantKinds []string
	}{
		{"defaults", nil, 1, false, []string{"Deployment", "PersistentVolumeClaim", "Service", "ServiceAccount"}},
		{"sqlite with everything optional", map[string]any{
			"publicURL":     "https://mcp.example.com",
			"ingress":       map[string]any{"enabled": true, "tlsSecretName": "tls"},
			"metrics":       map[string]any{"enabled": true, "serviceMonitor": map[string]any{"enabled": true}},
			"networkPolicy": map[string]any{"enabled": true},
		}, 1, false, []string{"Deployment", "Ingress", "NetworkPolicy", "PersistentVolumeClaim", "Service", "ServiceAccount", "ServiceMonitor"}},
		{"one gateway on PostgreSQL", pgValues, 1, true, []string{"Deployment", "Service", "ServiceAccount"}},
		{"values-cluster.yaml", cluster, 3, true, []string{"Deployment", "Ingress", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceMonitor"}},
		{"cluster with autoscaling", with(cluster, "autoscaling.enabled", true), 0, true, []string{"Deployment", "HorizontalPodAutoscaler", "Ingress", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceMonitor"}},
		{"two gateways, no service account", with(with(with(pgValues, "replicaCount", 2), "nats.url", "nats://nats:4222"), "serviceAccount.create", false), 2, true, []string{"Deployment", "PodDisruptionBudget", "Service"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files, err := renderChart(t, c.vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			o := decode(t, files)
			kinds := slices.Sorted(slices.Values(o.kinds))
			if !slices.Equal(kinds, c.wantKinds) {
				t.Errorf("objects %v, want %v", kinds, c.wantKinds)
			}
			d := o.deployment
			if d == nil {
				t.Fatal("no Deployment")
			}
			switch {
			case c.replicas == 0 && d.Spec.Replicas != nil:
				t.Errorf("with the HPA on, the Deployment sets replicas %d; it must leave them to the HPA", *d.Spec.Replicas)
			case c.replicas != 0 && (d.Spec.Replicas == nil || *d.Spec.Replicas != c.replicas):
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, c.replicas)
			}
			checkPod(t, d.Spec.Template.Spec)
			env := envOf(d.Spec.Template.Spec.Containers[0])
			checkNoLiteralSecrets(t, files, env)
			if c.postgres {
				data := env["SPACEFIX_DATA"]
				if data.ValueFrom == nil || data.ValueFrom.SecretKeyRef == nil || data.ValueFrom.SecretKeyRef.Key != "url" {
					t.Errorf("SPACEFIX_DATA on PostgreSQL = %+v, want it from the Secret's key url", data)
				}
				if got := env["SPACEFIX_SECRET_KEY_FILE"].Value; got != "/etc/spacefix/secret.key" {
					t.Errorf("SPACEFIX_SECRET_KEY_FILE = %q", got)
				}
				if len(o.pvcs) != 0 || d.Spec.Strategy.Type != "RollingUpdate" {
					t.Errorf("on PostgreSQL: %d PVCs, strategy %s; want none and RollingUpdate", len(o.pvcs), d.Spec.Strategy.Type)
				}
			} else {
				if got := env["SPACEFIX_DATA"].Value; got != "/data/spacefix.db" {
					t.Errorf("SPACEFIX_DATA on SQLite = %q, want /data/spacefix.db", got)
				}
				if len(o.pvcs) != 1 || d.Spec.Strategy.Type != "Recreate" {
					t.Errorf("on SQLite: %d PVCs, strategy %s; want 1 and Recreate (one pod at a time opens the file)", len(o.pvcs), d.Spec.Strategy.Type)
				}
				if !mounts(d.Spec.Template.Spec, "/data", func(v corev1.Volume) bool {
					return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == o.pvcs[0].Name
				}) {
					t.Error("/data is not the PersistentVolumeClaim")
				}
			}
			if c.replicas != 1 && (o.pdb == nil || o.pdb.Spec.MinAvailable == nil) {
				t.Error("several gateways without a PodDisruptionBudget")
			}
		})
	}
}

// checkPod checks the probes, the drain and the security context.
func checkPod(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.name, p.probe, p.path)
		}
	}
	// The drain: --shutdown-grace, and more than that before the kill.
	if !slices.Equal(c.Args, []string{"serve", "--shutdown-grace", "10s"}) {
		t.Errorf("args %q", c.Args)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 10 {
		t.Errorf("terminationGracePeriodSeconds %v: not longer than the 10 s drain", g)
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("the root filesystem is not read-only")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want all dropped", sc.Capabilities)
	}
	if !mounts(pod, "/tmp", func(v corev1.Volume) bool { return v.EmptyDir != nil }) {
		t.Error("/tmp is not an emptyDir: the read-only root leaves SQLite and Go no temporary folder")
	}
}

// checkNoLiteralSecrets fails when a secret could be read from the
// Deployment or a ConfigMap: a database URL or key material as a literal
// value. Secrets come from Secrets the user made; the chart makes none.
func checkNoLiteralSecrets(t *testing.T, files map[string]string, env map[string]corev1.EnvVar) {
	t.Helper()
	for name, e := range env {
		if strings.HasPrefix(e.Value, "postgres") || strings.Contains(e.Value, "@") ||
			(strings.Contains(name, "SECRET") && !strings.HasPrefix(e.Value, "/")) {
			t.Errorf("env %s has a literal value that looks secret: %q", name, e.Value)
		}
	}
	for name, body := range files {
		if strings.Contains(body, "kind: ConfigMap") || strings.Contains(body, "kind: Secret") {
			t.Errorf("%s makes a ConfigMap or Secret: the chart must only refer to the user's Secrets", name)
		}
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// mounts reports whether the container mounts a volume that is at path.
func mounts(pod corev1.PodSpec, path string, is func(corev1.Volume) bool) bool {
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && is(v) {
				return true
			}
		}
	}
	return false
}

// TestChartCluster checks values-cluster.yaml's three gateways: the bus,
// the public URL on the Ingress, and each gateway advertising its own pod.
func TestChartCluster(t *testing.T) {
	files, err := renderChart(t, clusterValues(t))
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, files)
	env := envOf(o.deployment.Spec.Template.Spec.Containers[0])
	for name, want := range map[string]string{
		"SPACEFIX_BUS":            "nats://nats.nats.svc:4222",
		"SPACEFIX_PUBLIC_URL":     "https://mcp.example.com",
		"SPACEFIX_ADVERTISE_ADDR": "$(POD_IP):8080",
		"SPACEFIX_METRICS_ADDR":   "0.0.0.0:9090",
	} {
		if got := env[name].Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	hosts := strings.Split(env["SPACEFIX_ALLOWED_HOSTS"].Value, ",")
	for _, h := range []string{"mcp.example.com", "spacefix.mcp.svc", "localhost"} {
		if !slices.Contains(hosts, h) {
			t.Errorf("SPACEFIX_ALLOWED_HOSTS %q lacks %s", hosts, h)
		}
	}
	if r := o.ingress.Spec.Rules; len(r) != 1 || r[0].Host != "mcp.example.com" || o.ingress.Spec.TLS[0].SecretName != "spacefix-tls" {
		t.Errorf("Ingress rules %+v, TLS %+v", r, o.ingress.Spec.TLS)
	}
	if o.pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 2 of 3", o.pdb.Spec.MinAvailable)
	}
	sm := o.serviceMonitor
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || !maps.Equal(sm.Spec.Selector.MatchLabels, o.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("ServiceMonitor %+v does not scrape the gateways' metrics port", sm.Spec)
	}
	vol := o.deployment.Spec.Template.Spec.Volumes
	if !slices.ContainsFunc(vol, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "spacefix-secret-key" && v.Secret.Items[0].Key == "secret.key"
	}) {
		t.Errorf("the secret key file is not mounted from secretKey.existingSecret's key secret.key: %+v", vol)
	}
}

// TestChartRefuses: values that cannot work do not render, and the error
// says why and what to set.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"two replicas on SQLite", map[string]any{"replicaCount": 2},
			"replicaCount is more than 1 (or autoscaling is on) on SQLite: SQLite is one file on one volume that only one gateway may open at a time. Set postgres.existingSecret (a Secret with key url) and nats.url to run several gateways, or keep replicaCount: 1."},
		{"autoscaling on SQLite", map[string]any{"autoscaling": map[string]any{"enabled": true}}, "on SQLite: SQLite is one file on one volume"},
		{"two replicas without NATS", with(pgValues, "replicaCount", 3), "without nats.url: gateways sharing a store need NATS to share agents and calls. Set nats.url"},
		{"PostgreSQL without the key file", map[string]any{"postgres": map[string]any{"existingSecret": "pg"}}, "with PostgreSQL every gateway needs the same secret key file"},
		{"an Ingress without publicURL", map[string]any{"ingress": map[string]any{"enabled": true}}, "ingress.enabled needs publicURL"},
		{"a publicURL with a path", map[string]any{"publicURL": "https://example.com/mcp"}, `publicURL "https://example.com/mcp" is not a base URL`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderChart(t, c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("render: %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}
