package main

// The deployment files in deploy/ must be valid Kubernetes objects and
// every herd command line in them must parse with herd's own flags, so a
// renamed flag breaks this test rather than a cluster.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"herd/launch"
)

// parseHerdArgs finds the subcommand of args and parses its flags without
// running it.
func parseHerdArgs(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("no herd subcommand in %q", args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.Name(), err)
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
			return fmt.Errorf("%s: %w", cmd.Name(), err)
		}
	}
	return nil
}

// manifest is what the deploy tests check in one decoded document.
type manifest struct {
	kind, name string
	// herdArgs are the herd containers' argument lists with $(VAR) of
	// their env expanded as Kubernetes does: to a literal value, and to
	// "0" for a value from a field or secret (a whole argument).
	herdArgs  [][]string
	herdEnv   []map[string]corev1.EnvVar
	claims    []string // persistentVolumeClaim names its pods mount
	secrets   []string // secrets its pods read (volumes, env)
	pod       *corev1.PodSpec
	podLabels map[string]string
	job       *batchv1.Job
	sts       *appsv1.StatefulSet
	configMap *corev1.ConfigMap
	pdb       *policyv1.PodDisruptionBudget
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandEnv expands $(NAME) in a as Kubernetes does in a container's args.
func expandEnv(a string, env map[string]corev1.EnvVar) string {
	if v, ok := strings.CutPrefix(a, "$("); ok && strings.HasSuffix(v, ")") {
		if e, ok := env[strings.TrimSuffix(v, ")")]; ok && e.ValueFrom != nil {
			return "0" // a field or secret, known only in the cluster
		}
	}
	return envRef.ReplaceAllStringFunc(a, func(ref string) string {
		if e, ok := env[ref[2:len(ref)-1]]; ok && e.ValueFrom == nil {
			return e.Value
		}
		return ref
	})
}

// decodeManifest decodes one YAML document strictly into the k8s type of
// its kind.
func decodeManifest(doc []byte) (m manifest, err error) {
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return m, err
	}
	m.kind, m.name = meta.Kind, meta.Metadata.Name
	var pod *corev1.PodSpec
	switch meta.Kind {
	case "StatefulSet":
		var o appsv1.StatefulSet
		err = yaml.UnmarshalStrict(doc, &o)
		pod, m.sts, m.podLabels = &o.Spec.Template.Spec, &o, o.Spec.Template.Labels
	case "Deployment":
		var o appsv1.Deployment
		err = yaml.UnmarshalStrict(doc, &o)
		pod, m.podLabels = &o.Spec.Template.Spec, o.Spec.Template.Labels
	case "Job":
		var o batchv1.Job
		err = yaml.UnmarshalStrict(doc, &o)
		pod, m.job, m.podLabels = &o.Spec.Template.Spec, &o, o.Spec.Template.Labels
	case "PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		err = yaml.UnmarshalStrict(doc, &o)
		m.pdb = &o
	case "Service":
		var o corev1.Service
		err = yaml.UnmarshalStrict(doc, &o)
	case "ConfigMap":
		var o corev1.ConfigMap
		err = yaml.UnmarshalStrict(doc, &o)
		m.configMap = &o
	case "PersistentVolumeClaim":
		var o corev1.PersistentVolumeClaim
		err = yaml.UnmarshalStrict(doc, &o)
	default:
		return m, fmt.Errorf("unknown kind %q", meta.Kind)
	}
	if err != nil {
		return m, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	if pod != nil {
		m.pod = pod
		for _, c := range pod.Containers {
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					m.secrets = append(m.secrets, e.ValueFrom.SecretKeyRef.Name)
				}
			}
			if strings.HasPrefix(c.Image, "herd") {
				var args []string
				for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
					args = append(args, expandEnv(a, env))
				}
				m.herdArgs = append(m.herdArgs, args)
				m.herdEnv = append(m.herdEnv, env)
			}
		}
		for _, v := range pod.Volumes {
			if v.PersistentVolumeClaim != nil {
				m.claims = append(m.claims, v.PersistentVolumeClaim.ClaimName)
			}
			if v.Secret != nil {
				m.secrets = append(m.secrets, v.Secret.SecretName)
			}
		}
	}
	return m, nil
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) string {
	for j := range args[:max(len(args)-1, 0)] {
		if args[j] == name {
			return args[j+1]
		}
	}
	return ""
}

// checkFaultTolerance reports what the manifests lack of the promised
// fault tolerance and security: 3 NATS nodes and bucket replicas, a
// registration TTL above NATS's 4–9 s leader election, client TLS and
// credentials from a Secret (never on a command line), mutual TLS on the
// cluster routes, and workers as Indexed Jobs whose completion index is
// their slot (a Deployment or StatefulSet restarts a worker that exits 0
// at the end of the run into a crash loop).
func checkFaultTolerance(ms []manifest) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	natsNodes, natsConf := 0, ""
	roles := map[string]*manifest{}
	for i := range ms {
		m := &ms[i]
		if m.sts != nil && m.name == "nats" && m.sts.Spec.Replicas != nil {
			natsNodes = int(*m.sts.Spec.Replicas)
		}
		if m.configMap != nil {
			if c, ok := m.configMap.Data["nats.conf"]; ok {
				natsConf = c
			}
		}
		for k, args := range m.herdArgs {
			what := m.kind + " " + m.name
			if r := flagValue(args, "--role"); r != "" {
				roles[r] = m
			}
			if strings.Contains(strings.Join(args, " "), "@") || flagValue(args, "--nats") != "" {
				bad("%s: the NATS URL is on the command line; it belongs in $HERD_NATS_URL from a Secret", what)
			}
			if e := m.herdEnv[k][launch.URLEnv]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				bad("%s: $%s does not come from a Secret", what, launch.URLEnv)
			}
			if flagValue(args, "--nats-replicas") != "3" {
				bad("%s: --nats-replicas is %q, want 3 (one node lost loses no bucket)", what, flagValue(args, "--nats-replicas"))
			}
			if ttl, err := time.ParseDuration(flagValue(args, "--ttl")); err != nil || ttl <= 9*time.Second {
				bad("%s: --ttl %q is not above NATS's 4–9 s leader election", what, flagValue(args, "--ttl"))
			}
			if flagValue(args, "--nats-tls-ca") == "" {
				bad("%s: no --nats-tls-ca: the client does not verify the server", what)
			}
		}
	}
	if natsNodes != 3 {
		bad("the NATS StatefulSet has %d replicas, want 3", natsNodes)
	}
	for _, want := range []string{"authorization", "$NATS_PASSWORD", "tls {", "verify: true", "cluster {"} {
		if !strings.Contains(natsConf, want) {
			bad("nats.conf lacks %q (client credentials, client TLS, mutual TLS on the routes)", want)
		}
	}
	if i := strings.Index(natsConf, "cluster {"); i < 0 || !strings.Contains(natsConf[i:], "tls {") {
		bad("nats.conf's cluster block has no tls: routes travel in clear")
	}
	for _, r := range []string{"env", "policy"} {
		m := roles[r]
		switch {
		case m == nil:
			bad("no %s workers", r)
		case m.job == nil:
			bad("%s workers are a %s: it restarts a worker that exits 0 at the end of the run", r, m.kind)
		case m.job.Spec.CompletionMode == nil || *m.job.Spec.CompletionMode != batchv1.IndexedCompletion:
			bad("%s workers' Job is not Indexed: they would share one slot (name and random streams)", r)
		case m.pod.RestartPolicy != corev1.RestartPolicyNever || m.job.Spec.BackoffLimitPerIndex == nil:
			bad("%s workers' restartPolicy is %q (backoffLimitPerIndex set: %v), want Never and a limit (the Job replaces a failed pod)", r, m.pod.RestartPolicy, m.job.Spec.BackoffLimitPerIndex != nil)
		default:
			arg := flagValue(m.herdArgs[0], "--slot")
			e := m.herdEnv[0]["SLOT"]
			if arg != "0" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
				!strings.Contains(e.ValueFrom.FieldRef.FieldPath, "job-completion-index") {
				bad("%s workers' --slot is not their completion index", r)
			}
		}
	}
	if m := roles["learner"]; m == nil || m.job == nil {
		bad("the learner is not a Job")
	}
	return errs
}

// checkLearners reports what keeps the manifests from running the M
// learner processes of the config's runtime.learners: learner 0 is a Job
// of one with the run directory; learners 1…M−1 an Indexed Job of M−1 pods
// whose completion index plus --slot-offset 1 is the learner id, never
// restarted (a peer restarted from scratch holds other parameters); the env
// workers a multiple of M (env worker k feeds learner k mod M); one run ID.
func checkLearners(ms []manifest) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var cfg struct {
		Runtime struct {
			EnvWorkers int `json:"env_workers"`
			Learners   int `json:"learners"`
		} `json:"runtime"`
	}
	found := false
	for _, m := range ms {
		if m.configMap == nil || m.name != "herd-config" {
			continue
		}
		for _, c := range m.configMap.Data {
			if err := yaml.Unmarshal([]byte(c), &cfg); err != nil {
				bad("herd-config: %v", err)
			}
			found = true
		}
	}
	if !found {
		return append(errs, fmt.Errorf("no herd-config ConfigMap"))
	}
	mLearners := max(cfg.Runtime.Learners, 1)
	runs := map[string]bool{}
	var lead, peers []*manifest
	envs := -1
	for i := range ms {
		m := &ms[i]
		for _, args := range m.herdArgs {
			runs[flagValue(args, "--run")] = true
			switch flagValue(args, "--role") {
			case "learner":
				if flagValue(args, "--slot-offset") == "" {
					lead = append(lead, m)
				} else {
					peers = append(peers, m)
				}
			case "env":
				if m.job != nil && m.job.Spec.Completions != nil {
					envs = int(*m.job.Spec.Completions)
				}
			}
		}
	}
	if len(runs) != 1 {
		bad("the herd pods name %d run IDs, want one", len(runs))
	}
	if len(lead) != 1 || lead[0].job == nil || lead[0].job.Spec.CompletionMode != nil || flagValue(lead[0].herdArgs[0], "--out") == "" {
		bad("learner 0 is not one Job of one pod writing --out")
	}
	if envs%mLearners != 0 {
		bad("%d env workers for %d learners: each learner needs its share (k mod learners)", envs, mLearners)
	}
	want := 0
	if mLearners > 1 {
		want = 1
	}
	if len(peers) != want {
		return append(errs, fmt.Errorf("%d Jobs of learners 1…M−1 for runtime.learners %d, want %d", len(peers), mLearners, want))
	}
	if want == 0 {
		return errs
	}
	p := peers[0]
	args, e := p.herdArgs[0], p.herdEnv[0]["SLOT"]
	switch j := p.job; {
	case j == nil || j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion:
		bad("learners 1…M−1 are not an Indexed Job")
	case j.Spec.Completions == nil || int(*j.Spec.Completions) != mLearners-1 || j.Spec.Parallelism == nil || *j.Spec.Parallelism != *j.Spec.Completions:
		bad("the learner peers' Job does not run M−1 = %d pods at once", mLearners-1)
	case j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 || p.pod.RestartPolicy != corev1.RestartPolicyNever:
		bad("the learner peers are restarted: a restarted learner holds other parameters than the group")
	case flagValue(args, "--slot") != "0" || flagValue(args, "--slot-offset") != "1" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		!strings.Contains(e.ValueFrom.FieldRef.FieldPath, "job-completion-index"):
		bad("the learner peers' id is not their completion index + --slot-offset 1")
	case flagValue(args, "--out") != "" || len(p.claims) > 0:
		bad("a learner peer writes a run directory: learner 0 alone writes the run")
	}
	return errs
}

func TestDeployKubernetes(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	kinds := map[string]int{}
	roles := map[string]bool{}
	pvcs := map[string]bool{}
	var claims, secrets []string
	var all []manifest
	// What `kubectl apply -k` sends: the kustomization rendered.
	docs, err := renderKustomization(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	{
		f := "kustomization"
		for i, doc := range docs {
			m, err := decodeManifest(doc)
			if err != nil {
				t.Errorf("%s doc %d: %v", f, i, err)
				continue
			}
			kinds[m.kind]++
			all = append(all, m)
			secrets = append(secrets, m.secrets...)
			if m.kind == "PersistentVolumeClaim" {
				pvcs[m.name] = true
			}
			claims = append(claims, m.claims...)
			for _, args := range m.herdArgs {
				if err := parseHerdArgs(args); err != nil {
					t.Errorf("%s: herd %q: %v", f, args, err)
				}
				for j := range args[:len(args)-1] {
					if args[j] == "--role" {
						roles[args[j+1]] = true
					}
				}
			}
		}
	}
	// A claim no manifest creates leaves its pod Pending for ever.
	for _, c := range claims {
		if !pvcs[c] {
			t.Errorf("a pod mounts persistentVolumeClaim %q, which no manifest creates", c)
		}
	}
	for _, err := range checkFaultTolerance(all) {
		t.Error(err)
	}
	for _, err := range checkLearners(all) {
		t.Error(err)
	}
	for _, err := range checkKubernetesRules(all) {
		t.Error(err)
	}
	// checkLearners catches what it is there for.
	for what, mutate := range map[string]func(ms []manifest){
		"one peer too few": func(ms []manifest) {
			for _, m := range ms {
				if m.name == "herd-learner-peers" {
					n := *m.job.Spec.Completions - 1
					m.job.Spec.Completions = &n
				}
			}
		},
		"peers restarted": func(ms []manifest) {
			for _, m := range ms {
				if m.name == "herd-learner-peers" {
					m.pod.RestartPolicy = corev1.RestartPolicyOnFailure
				}
			}
		},
		"no offset": func(ms []manifest) {
			for _, m := range ms {
				if m.name == "herd-learner-peers" {
					for k, a := range m.herdArgs[0] {
						if a == "--slot-offset" {
							m.herdArgs[0][k+1] = "0"
						}
					}
				}
			}
		},
		"three learners": func(ms []manifest) {
			for _, m := range ms {
				if m.name == "herd-config" {
					for k, c := range m.configMap.Data {
						m.configMap.Data[k] = strings.Replace(c, "learners: 2", "learners: 3", 1)
					}
				}
			}
		},
	} {
		ms := cloneManifests(all)
		mutate(ms)
		if len(checkLearners(ms)) == 0 {
			t.Errorf("%s: checkLearners found nothing wrong", what)
		}
	}
	// The secrets are made by the operator (nats.yaml says how), never
	// committed: exactly these two.
	for _, s := range secrets {
		if s != "herd-nats-auth" && s != "herd-nats-tls" {
			t.Errorf("a pod reads secret %q, which nats.yaml does not tell the operator to create", s)
		}
	}
	for _, k := range []string{"StatefulSet", "Service", "Job", "ConfigMap", "PersistentVolumeClaim"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	for _, r := range []string{"env", "policy", "learner"} {
		if !roles[r] {
			t.Errorf("no worker with --role %s", r)
		}
	}

	// Every file must be listed in the kustomization.
	var kz struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kz); err != nil {
		t.Fatal(err)
	}
	if len(kz.Resources) != len(files)-1 {
		t.Errorf("kustomization lists %d resources, want %d", len(kz.Resources), len(files)-1)
	}
}

// TestDeployCompose checks the compose files: deploy/compose.yaml (images
// from a registry), deploy/compose/compose.yaml (images built FROM scratch,
// a 3-node NATS cluster, buckets R3) and its single-host forms
// deploy/compose/single.yaml and single-host.yaml (one NATS server, buckets
// R1; the second on the host's network). ${VAR:-default} and ${VAR-default}
// in a command or the environment are read as their default.
func TestDeployCompose(t *testing.T) {
	type want struct {
		nodes, replicas int
		host            bool // network_mode: host, NATS on loopback
	}
	files := map[string]*want{
		"compose.yaml":                               nil,
		filepath.Join("compose", "compose.yaml"):     {nodes: 3, replicas: 3},
		filepath.Join("compose", "single.yaml"):      {nodes: 1, replicas: 1},
		filepath.Join("compose", "single-host.yaml"): {nodes: 1, replicas: 1, host: true},
	}
	for file, w := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Services map[string]struct {
					Image       string            `json:"image"`
					Command     []string          `json:"command"`
					Environment map[string]string `json:"environment"`
					NetworkMode string            `json:"network_mode"`
					Networks    []string          `json:"networks"`
				} `json:"services"`
			}
			if err := yaml.Unmarshal(data, &c); err != nil {
				t.Fatal(err)
			}
			n, nats := 0, 0
			for name, s := range c.Services {
				if w != nil && (s.NetworkMode == "host") != w.host {
					t.Errorf("compose service %s: network_mode %q, networks %v", name, s.NetworkMode, s.Networks)
				}
				if strings.HasPrefix(name, "nats") {
					nats++
					if w != nil && composeDefault(s.Environment["GOMAXPROCS"]) != "1" {
						t.Errorf("compose service %s: GOMAXPROCS %q, want 1 by default", name, s.Environment["GOMAXPROCS"])
					}
				}
				if !strings.HasPrefix(s.Image, "herd:") {
					continue
				}
				n++
				args := make([]string, len(s.Command))
				for i, a := range s.Command {
					args[i] = composeDefault(a)
				}
				if err := parseHerdArgs(args); err != nil {
					t.Errorf("compose service %s: %v", name, err)
				}
				if strings.Contains(strings.Join(args, " "), "@") {
					t.Errorf("compose service %s: credentials on the command line: %q", name, args)
				}
				if w == nil {
					continue
				}
				// Every bucket on every node (3: one node lost loses no
				// bucket), registrations that outlive a leader election, the
				// URLs from the environment.
				a := strings.Join(args, " ")
				if !strings.Contains(a, fmt.Sprintf("--nats-replicas %d", w.replicas)) || !strings.Contains(a, "--ttl 15s") {
					t.Errorf("compose service %s: want --nats-replicas %d and --ttl 15s, got %q", name, w.replicas, a)
				}
				url := composeDefault(s.Environment["HERD_NATS_URL"])
				if strings.Count(url, "nats://") != w.nodes || w.host != strings.HasPrefix(url, "nats://127.0.0.1:") {
					t.Errorf("compose service %s: HERD_NATS_URL %q, want the %d node(s)", name, url, w.nodes)
				}
				// The learner, the critical path, gets every core; the others
				// one each unless the variables say otherwise.
				gmp, wantGMP := composeDefault(s.Environment["GOMAXPROCS"]), "1"
				if name == "learner" {
					wantGMP = ""
				}
				if _, ok := s.Environment["GOMAXPROCS"]; !ok || gmp != wantGMP {
					t.Errorf("compose service %s: GOMAXPROCS %q (default %q), want default %q", name, s.Environment["GOMAXPROCS"], gmp, wantGMP)
				}
			}
			if n < 4 {
				t.Errorf("compose has %d herd services, want the controller and the three roles", n)
			}
			if w != nil && nats != w.nodes {
				t.Errorf("compose has %d NATS nodes, want %d", nats, w.nodes)
			}
		})
	}
}

// composeDefault reads compose's ${VAR:-default} and ${VAR-default} in v as
// their defaults (a whole value or a part of one).
func composeDefault(v string) string {
	var b strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			return b.String() + v
		}
		j := strings.Index(v[i:], "}")
		if j < 0 {
			return b.String() + v
		}
		b.WriteString(v[:i])
		ref := v[i+2 : i+j]
		if _, def, ok := strings.Cut(ref, ":-"); ok {
			b.WriteString(def)
		} else if _, def, ok := strings.Cut(ref, "-"); ok {
			b.WriteString(def)
		}
		v = v[i+j+1:]
	}
}

func TestDeployRejects(t *testing.T) {
	if err := parseHerdArgs([]string{"worker", "--role", "env", "--nat", "nats://x:4222", "--run", "r"}); err == nil {
		t.Error("a typo'd flag (--nat) was accepted")
	}
	if err := parseHerdArgs([]string{"launch", "--no-workers", "--nats", "nats://x:4222"}); err != nil {
		t.Errorf("launch --no-workers: %v", err)
	}
	bad := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 1}\n")
	if _, err := decodeManifest(bad); err == nil {
		t.Error("an unknown field (replica) was accepted")
	}
	if _, err := decodeManifest([]byte("apiVersion: v1\nkind: Pod\n")); err == nil {
		t.Error("an unexpected kind was accepted")
	}
}
