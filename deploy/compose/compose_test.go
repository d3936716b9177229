// Package compose holds the container test of deploy/compose: a
// distributed PPO CartPole run across containers, images built FROM
// scratch, no image registry needed.
package compose

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dockerTestsEnv opts in to the container test: it builds two static
// binaries and two images and runs a compose project, minutes on a small
// machine.
const dockerTestsEnv = "HERD_DOCKER_TESTS"

// needDocker skips the test, saying why, where it cannot or should not run.
func needDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("container test skipped: docker not found on PATH (it needs Docker Engine with compose)")
	}
	if os.Getenv(dockerTestsEnv) == "" {
		t.Skip("container test skipped: set " + dockerTestsEnv + "=1 to build the images FROM scratch and run PPO across containers (minutes)")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("container test skipped: the Docker daemon is not reachable: %v: %s", err, firstLine(out))
	}
	if exec.Command("docker", "compose", "version").Run() != nil {
		if _, err := exec.LookPath("docker-compose"); err != nil {
			t.Skip("container test skipped: neither `docker compose` nor docker-compose is installed")
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// TestComposeRun brings up deploy/compose/compose.yaml (3 NATS nodes with
// JetStream R3, the controller, 2 env workers, a policy worker and the
// learner, each in its own container) through scripts/dist_containers.sh,
// and checks that the run completed with every planned step learned:
// controller exit 0, summary "completed" after the planned steps, the
// exactly-once counters reported (dist/duplicates: repeats recognised and
// not learned again) and no decode error. The subtests run the single-host
// topologies the same way: one NATS server (R1) on the private network
// (single.yaml) and on the host's (single-host.yaml).
func TestComposeRun(t *testing.T) {
	needDocker(t)
	var built []string // the images, once the first run has built them
	for _, tc := range []struct{ name, nodes, network string }{
		{"cluster", "3", "bridge"}, {"single", "1", "bridge"}, {"single-host", "1", "host"},
	} {
		ok := t.Run(tc.name, func(t *testing.T) {
			composeRun(t, append(built, "HERD_NATS_NODES="+tc.nodes, "HERD_NETWORK="+tc.network)...)
		})
		if ok {
			built = []string{"SKIP_BUILD=1"}
		}
	}
}

// composeRun runs scripts/dist_containers.sh's row "none" with env added
// and checks the run.
func composeRun(t *testing.T, env ...string) {
	keep := t.TempDir()
	const steps = 30000
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "dist_containers.sh"), "none")
	cmd.Env = append(append(os.Environ(), "KEEP="+keep, "STEPS=30000", "FAULT_AT=0"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		if b, lerr := os.ReadFile(filepath.Join(keep, "none", "logs.txt")); lerr == nil {
			t.Logf("compose logs:\n%s", b)
		}
		t.Fatalf("scripts/dist_containers.sh none: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(keep, "none", "summary.json"))
	if err != nil {
		t.Fatalf("the learner's summary.json: %v", err)
	}
	var s struct {
		Status string             `json:"status"`
		Steps  int64              `json:"steps"`
		Dist   map[string]float64 `json:"dist"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	// PPO learns whole segments: 2 env workers × 4 envs × 128 steps.
	if s.Status != "completed" || s.Steps < steps-1024 || s.Steps > steps {
		t.Errorf("run %s after %d steps, want completed after %d (whole segments)", s.Status, s.Steps, steps)
	}
	if _, ok := s.Dist["dist/duplicates"]; !ok {
		t.Error("summary has no dist/duplicates")
	}
	if v, ok := s.Dist["dist/decode_errors"]; !ok || v != 0 {
		t.Errorf("summary dist/decode_errors = %v (present %v), want 0", v, ok)
	}
}
