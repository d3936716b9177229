package prom

import (
	"strings"
	"testing"
)

func TestParseText(t *testing.T) {
	in := `# HELP herd_env_steps_total Environment steps taken by the run.
# TYPE herd_env_steps_total counter
herd_env_steps_total 253440
herd_scalar{tag="losses/value_loss"} 0.014
herd_run_info{algo="ppo",env="a } b",seed="1"} 1
herd_x_seconds_bucket{le="+Inf"} 7 1700000000000
`
	m, err := ParseText(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{"herd_env_steps_total": 253440, `herd_scalar{tag="losses/value_loss"}`: 0.014,
		`herd_run_info{algo="ppo",env="a } b",seed="1"}`: 1, `herd_x_seconds_bucket{le="+Inf"}`: 7} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if len(m) != 4 {
		t.Errorf("%d series, want 4: %v", len(m), m)
	}
	for _, bad := range []string{"herd_x\n", "herd_x one\n", "herd_x{a=\"b\"}\n"} {
		if _, err := ParseText(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestOffsetAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		k    int
		want string
	}{{"127.0.0.1:9464", 3, "127.0.0.1:9467"}, {":9464", 1, ":9465"}, {"127.0.0.1:0", 5, "127.0.0.1:0"}, {"[::1]:9000", 2, "[::1]:9002"}} {
		if got, err := OffsetAddr(c.addr, c.k); err != nil || got != c.want {
			t.Errorf("OffsetAddr(%q, %d) = %q, %v, want %q", c.addr, c.k, got, err, c.want)
		}
	}
	for _, bad := range []string{"9464", "host:x", "h:65535"} {
		if _, err := OffsetAddr(bad, 1); err == nil {
			t.Errorf("OffsetAddr(%q, 1): no error", bad)
		}
	}
}
