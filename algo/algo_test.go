package algo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type fakeConfig struct {
	LR      float64 `yaml:"learning_rate"`
	NumEnvs int     `yaml:"num_envs"`
	Arch    []int   `yaml:"net_arch"`
	EntCoef float64 `yaml:"ent_coef"`
}

func (c *fakeConfig) Validate(h Header) error {
	var errs []error
	if c.LR <= 0 {
		errs = append(errs, fmt.Errorf("%w: learning_rate must be > 0", ErrConfig))
	}
	if c.NumEnvs <= 0 {
		errs = append(errs, fmt.Errorf("%w: num_envs must be > 0", ErrConfig))
	}
	return errors.Join(errs...)
}

func fakeSpecs() []Spec {
	return []Spec{{
		Name: "fake",
		NewConfig: func() Config {
			return &fakeConfig{LR: 2.5e-4, NumEnvs: 4, Arch: []int{64, 64}, EntCoef: 0.01}
		},
		Train: func(context.Context, *Runtime, Config) (Model, error) { return nil, nil },
	}, {Name: "other", NewConfig: func() Config { return &fakeConfig{LR: 1, NumEnvs: 1} }}}
}

func TestResolveFileAndOverrides(t *testing.T) {
	file := `
algo: fake
env: CartPole-v1
steps: 1000
fake:
  num_envs: 8
  ent_coef: 0
`
	r, err := Resolve([]byte(file), fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Config.(*fakeConfig)
	if c.NumEnvs != 8 || c.LR != 2.5e-4 || c.EntCoef != 0 || len(c.Arch) != 2 {
		t.Fatalf("config %+v: want num_envs 8 from the file, defaults elsewhere, ent_coef 0 kept", c)
	}
	want := Header{Algo: "fake", Env: "CartPole-v1", Seed: 1, Steps: 1000, Out: "runs/fake-CartPole-v1-1", LogEvery: 1000,
		Runtime: RuntimeConfig{Executor: "local"}}
	if !reflect.DeepEqual(r.Header, want) {
		t.Fatalf("header %+v, want %+v", r.Header, want)
	}

	seed, steps := uint64(7), int64(50)
	r, err = Resolve([]byte(file), fakeSpecs(), Overrides{Seed: &seed, Steps: &steps,
		Set: []string{"learning_rate=1e-3", "net_arch=[32, 16, 8]", "checkpoint_every=500", "checkpoint_keep=2"}})
	if err != nil {
		t.Fatal(err)
	}
	c = r.Config.(*fakeConfig)
	if r.Header.Seed != 7 || r.Header.Steps != 50 || r.Header.Out != "runs/fake-CartPole-v1-7" {
		t.Fatalf("flags did not override the header: %+v", r.Header)
	}
	if r.Header.CheckpointEvery != 500 || r.Header.CheckpointKeep != 2 || r.Header.Env != "CartPole-v1" {
		t.Fatalf("--set of the checkpoint keys: header %+v", r.Header)
	}
	if c.LR != 1e-3 || len(c.Arch) != 3 || c.Arch[2] != 8 || c.NumEnvs != 8 {
		t.Fatalf("--set did not override: %+v", c)
	}

	// The resolved file reads back to the same run.
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Resolve(b, fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(r2.Header, r.Header) || fmt.Sprint(r2.Config) != fmt.Sprint(r.Config) {
		t.Fatalf("round trip: %+v %+v, want %+v %+v\n%s", r2.Header, r2.Config, r.Header, r.Config, b)
	}
}

func TestResolveErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		set        []string
		want       string
		unknown    bool
	}{
		{"unknown top key", "algo: fake\nenv: E\nsteps: 10\nlearning_rate: 3\n", nil, `"learning_rate"`, false},
		{"unknown section key", "algo: fake\nenv: E\nsteps: 10\nfake:\n  num_env: 3\n", nil, "num_env", false},
		{"wrong type", "algo: fake\nenv: E\nsteps: ten\n", nil, "ten", false},
		{"unknown --set key", "algo: fake\nenv: E\nsteps: 10\n", []string{"lr=3"}, "lr", false},
		{"malformed --set", "algo: fake\nenv: E\nsteps: 10\n", []string{"lr"}, "key=value", false},
		{"section of another algo", "algo: fake\nenv: E\nsteps: 10\nother:\n  num_envs: 3\n", nil, `"other"`, false},
		{"validate", "algo: fake\nenv: E\nsteps: 10\nfake:\n  learning_rate: -1\n  num_envs: 0\n", nil, "num_envs", false},
		{"missing header", "fake:\n  num_envs: 3\n", nil, "steps must be > 0", false},
		{"not a mapping", "- 1\n- 2\n", nil, "mapping", false},
		{"unknown algo", "algo: nope\nenv: E\nsteps: 10\n", nil, `"nope"`, true},
		{"section twice", "algo: fake\nenv: E\nsteps: 10\nfake:\n  num_envs: 3\nfake:\n  num_envs: 5\n", nil, `"fake" is written twice`, false},
		{"header key twice", "algo: fake\nenv: E\nsteps: 10\nsteps: 20\n", nil, `"steps" is written twice`, false},
		{"infinite value", "algo: fake\nenv: E\nsteps: 10\n", []string{"learning_rate=.inf"}, "learning_rate must be a finite number", false},
		{"negative checkpoint_every", "algo: fake\nenv: E\nsteps: 10\n", []string{"checkpoint_every=-5"}, "checkpoint_every must be >= 0", false},
		{"checkpoint_keep not a number", "algo: fake\nenv: E\nsteps: 10\n", []string{"checkpoint_keep=two"}, "checkpoint_keep", false},
		{"NaN value", "algo: fake\nenv: E\nsteps: 10\nfake:\n  ent_coef: .nan\n", nil, "ent_coef must be a finite number", false},
	} {
		_, err := Resolve([]byte(tc.file), fakeSpecs(), Overrides{Set: tc.set})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.want)
		}
		if want := ErrConfig; tc.unknown {
			if !errors.Is(err, ErrUnknownAlgo) {
				t.Errorf("%s: %v is not ErrUnknownAlgo", tc.name, err)
			}
		} else if !errors.Is(err, want) {
			t.Errorf("%s: %v is not ErrConfig", tc.name, err)
		}
	}
	// Validate reports every problem, not just the first.
	_, err := Resolve([]byte("algo: fake\nenv: E\nsteps: 10\nfake:\n  learning_rate: -1\n  num_envs: 0\n"), fakeSpecs(), Overrides{})
	if err == nil || !strings.Contains(err.Error(), "learning_rate") || !strings.Contains(err.Error(), "num_envs") {
		t.Fatalf("want both problems reported, got %v", err)
	}
}

func TestResolveFlagsOnly(t *testing.T) {
	a, e, st := "fake", "Pendulum-v1", int64(20)
	r, err := Resolve(nil, fakeSpecs(), Overrides{Algo: &a, Env: &e, Steps: &st})
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Env != e || r.Spec.Name != "fake" || r.Config.(*fakeConfig).NumEnvs != 4 {
		t.Fatalf("got %+v %+v", r.Header, r.Config)
	}
}

func TestRuntimeSection(t *testing.T) {
	file := "algo: fake\nenv: CartPole-v1\nsteps: 1000\nruntime:\n  executor: local\n"
	r, err := Resolve([]byte(file), fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Runtime.Executor != "local" {
		t.Fatalf("executor %q", r.Header.Runtime.Executor)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Resolve(b, fakeSpecs(), Overrides{}); err != nil || !reflect.DeepEqual(again.Header, r.Header) {
		t.Fatalf("config.yaml does not read back: %v, %+v", err, again)
	}
	// An executor the build lacks, or a key the executor does not read,
	// resolves (the section is only data) and is refused by AdmitRun.
	for bad, want := range map[string]string{
		"runtime:\n  executor: warp\n": `runtime.executor "warp" is not one of [local]`,
		"runtime:\n  actors: 2\n":      "runtime.actors is not a setting of executor local (it reads only runtime.executor and runtime.replay_locking)",
	} {
		r, err := Resolve([]byte("algo: fake\nenv: CartPole-v1\nsteps: 1000\n"+bad), fakeSpecs(), Overrides{})
		if err != nil {
			t.Fatalf("%q: %v", bad, err)
		}
		if _, err := AdmitRun(withLocal(nil), r); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrConfig saying %q", bad, err, want)
		}
	}
}

// config.yaml (Marshal) holds no NATS password: the URL's user
// information is replaced, the host stays.
func TestMarshalHidesNATSPassword(t *testing.T) {
	r, err := Resolve([]byte("algo: fake\nenv: CartPole-v1\nsteps: 100\n"), fakeSpecs(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Runtime.Transport, r.Header.Runtime.NATSURL = "nats", "nats://herd:s3cr3tpw@nats.example:4222"
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3tpw") || !strings.Contains(string(b), "nats://***@nats.example:4222") {
		t.Errorf("config.yaml:\n%s", b)
	}
}
