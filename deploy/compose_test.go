package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads compose/compose.yaml as `docker compose config` would,
// with env as the environment (and no .env file).
func loadCompose(t *testing.T, env ...string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose/compose.yaml"},
		cli.WithWorkingDirectory("compose"), cli.WithEnv(env), cli.WithDiscardEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// The compose file is valid against the Compose specification and runs two
// gateways of one image on the same PostgreSQL and NATS, each with the
// secret key file as a secret, read-only and without capabilities.
func TestComposeTwoGateways(t *testing.T) {
	p, err := loadCompose(t, "POSTGRES_PASSWORD=pw-for-the-test")
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	names := slices.Sorted(slices.Values(p.ServiceNames()))
	if want := []string{"gateway-1", "gateway-2", "nats", "postgres"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	var ports []string
	for _, name := range []string{"gateway-1", "gateway-2"} {
		s := p.Services[name]
		env := func(k string) string {
			if v := s.Environment[k]; v != nil {
				return *v
			}
			return ""
		}
		if s.Image != "spacefix:dev" {
			t.Errorf("%s runs image %q, want spacefix:dev (scripts/docker-build)", name, s.Image)
		}
		if got, want := env("SPACEFIX_DATA"), "postgres://spacefix:pw-for-the-test@postgres:5432/spacefix?sslmode=disable"; got != want {
			t.Errorf("%s: SPACEFIX_DATA = %q, want %q", name, got, want)
		}
		if got := env("SPACEFIX_BUS"); got != "nats://nats:4222" {
			t.Errorf("%s: SPACEFIX_BUS = %q", name, got)
		}
		if len(s.Secrets) != 1 || s.Secrets[0].Source != "spacefix_secret_key" || env("SPACEFIX_SECRET_KEY_FILE") != "/run/secrets/spacefix_secret_key" {
			t.Errorf("%s: secrets %+v, SPACEFIX_SECRET_KEY_FILE %q; want the key file as a secret", name, s.Secrets, env("SPACEFIX_SECRET_KEY_FILE"))
		}
		if dep, ok := s.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s does not wait for PostgreSQL to be healthy: %+v", name, s.DependsOn)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) {
			t.Errorf("%s: read_only %v, cap_drop %v; want a read-only root and no capabilities", name, s.ReadOnly, s.CapDrop)
		}
		if s.StopGracePeriod == nil || *s.StopGracePeriod <= types.Duration(10e9) {
			t.Errorf("%s: stop_grace_period %v is not longer than the 10 s drain", name, s.StopGracePeriod)
		}
		for _, port := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%s->%d", port.HostIP, port.Published, port.Target))
		}
	}
	if want := []string{"127.0.0.1:8081->8080", "127.0.0.1:8082->8080"}; !slices.Equal(ports, want) {
		t.Errorf("published ports %v, want %v", ports, want)
	}
}

// Without a database password the file says where to set it.
func TestComposeNeedsPassword(t *testing.T) {
	_, err := loadCompose(t)
	if err == nil || !strings.Contains(err.Error(), "set POSTGRES_PASSWORD in .env") {
		t.Errorf("load without POSTGRES_PASSWORD: %v; want the message to set it in .env", err)
	}
}
