package main

// The Kubernetes manifests' rules beyond their types: what the API server
// would refuse or a cluster would break on (restart policy against the
// Job's backoff, a non-root image writing its volume), and what keeps a
// run alive on a shared cluster (resources, disruption budgets, probes,
// anti-affinity, a learner that waits for its workers), with the number
// of workers of each role one number in the kustomization.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// renderKustomization renders the kustomization in dir of fsys as
// `kubectl apply -k` does and returns its documents.
func renderKustomization(fsys filesys.FileSystem, dir string) ([][]byte, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		return nil, err
	}
	return bytes.Split(out, []byte("\n---\n")), nil
}

// loadKubernetes renders the kustomization in dir of fsys and decodes it.
func loadKubernetes(t *testing.T, fsys filesys.FileSystem, dir string) []manifest {
	t.Helper()
	docs, err := renderKustomization(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	var ms []manifest
	for i, doc := range docs {
		m, err := decodeManifest(doc)
		if err != nil {
			t.Fatalf("rendered doc %d: %v", i, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// cloneManifests deep-copies what the checks read, so that a test may
// break one copy.
func cloneManifests(all []manifest) []manifest {
	ms := make([]manifest, len(all))
	for i, m := range all {
		ms[i] = m
		switch {
		case m.job != nil:
			ms[i].job = m.job.DeepCopy()
			ms[i].pod = &ms[i].job.Spec.Template.Spec
		case m.sts != nil:
			ms[i].sts = m.sts.DeepCopy()
			ms[i].pod = &ms[i].sts.Spec.Template.Spec
		}
		if m.configMap != nil {
			ms[i].configMap = m.configMap.DeepCopy()
		}
		if m.pdb != nil {
			ms[i].pdb = m.pdb.DeepCopy()
		}
		ms[i].herdArgs = nil
		for _, a := range m.herdArgs {
			ms[i].herdArgs = append(ms[i].herdArgs, slices.Clone(a))
		}
	}
	return ms
}

// lastSet returns the value of the last `--set key=value` in args.
func lastSet(args []string, key string) string {
	v := ""
	for j := range args[:max(len(args)-1, 0)] {
		if args[j] == "--set" {
			if val, ok := strings.CutPrefix(args[j+1], key+"="); ok {
				v = val
			}
		}
	}
	return v
}

// probeCovers reports whether p is an HTTP GET of path on c's port port
// (a number or a port name of c).
func probeCovers(p *corev1.Probe, c *corev1.Container, path, port string) bool {
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
		return false
	}
	got := p.HTTPGet.Port
	if got.Type == intstr.Int {
		return strconv.Itoa(got.IntValue()) == port
	}
	for _, cp := range c.Ports {
		if cp.Name == got.StrVal {
			return strconv.Itoa(int(cp.ContainerPort)) == port
		}
	}
	return false
}

// antiAffinity reports whether the pod keeps away from pods with its own
// labels across nodes: required, or at least preferred.
func antiAffinity(m *manifest, required bool) bool {
	a := m.pod.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	ok := func(term corev1.PodAffinityTerm) bool {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		return err == nil && term.TopologyKey == "kubernetes.io/hostname" && !sel.Empty() && sel.Matches(labels.Set(m.podLabels))
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if ok(term) {
			return true
		}
	}
	if !required {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if ok(w.PodAffinityTerm) {
				return true
			}
		}
	}
	return false
}

// checkKubernetesRules reports, rule by rule, what the rendered manifests
// break:
//
//  1. a Job with backoffLimitPerIndex or a podFailurePolicy has
//     restartPolicy Never (the API refuses anything else);
//  2. herd's pods run as non-root (the image's user), and a pod that
//     mounts a volume claim sets fsGroup, so that user can write it;
//  3. every container requests CPU and memory and has a memory limit no
//     lower than its request;
//  4. every pod is in exactly one PodDisruptionBudget (the eviction API
//     refuses a pod in two); the learners' and the controller's allow no
//     eviction (neither is restarted: an eviction ends the run), NATS's
//     one node of its 3;
//  5. a herd container serving --metrics-addr has readiness and liveness
//     probes on that port's /metrics, and a startup probe that waits
//     longer than its --wait (it serves only once it has joined the run);
//     NATS has readiness and liveness probes;
//  6. the NATS nodes must be on different nodes (required anti-affinity),
//     the herd pods of one role prefer to be;
//  7. the learners wait for samples (--stall) at least as long as a worker
//     may take to join (--wait);
//  8. each worker Job runs every pod at once (parallelism = completions),
//     and the controller's runtime.env_workers and policy_workers are
//     those completions.
func checkKubernetesRules(ms []manifest) []error {
	var errs []error
	bad := func(rule int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("rule %d: "+format, append([]any{rule}, a...)...))
	}
	var pdbs []*manifest
	var controller []string
	jobs := map[string]*manifest{}
	workerWait := time.Duration(0)
	for i := range ms {
		m := &ms[i]
		if m.pdb != nil {
			pdbs = append(pdbs, m)
		}
		for _, args := range m.herdArgs {
			if args[0] == "launch" {
				controller = args
			}
			switch r := flagValue(args, "--role"); r {
			case "env", "policy":
				jobs[r] = m
				if d, err := time.ParseDuration(flagValue(args, "--wait")); err == nil {
					workerWait = max(workerWait, d)
				}
			}
		}
	}
	for i := range ms {
		m := &ms[i]
		if m.pod == nil {
			continue
		}
		what := m.kind + " " + m.name
		herd := len(m.herdArgs) > 0
		// 1
		if j := m.job; j != nil && (j.Spec.BackoffLimitPerIndex != nil || j.Spec.PodFailurePolicy != nil) && m.pod.RestartPolicy != corev1.RestartPolicyNever {
			bad(1, "%s: backoffLimitPerIndex or podFailurePolicy with restartPolicy %q: the API allows them only with Never", what, m.pod.RestartPolicy)
		}
		// 2
		sc := m.pod.SecurityContext
		if herd && (sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) {
			bad(2, "%s: herd's pod does not run as non-root (the image's user, 65532)", what)
		}
		if herd && len(m.claims) > 0 && (sc == nil || sc.FSGroup == nil) {
			bad(2, "%s: mounts %v without fsGroup: the non-root user cannot write it", what, m.claims)
		}
		// 3
		for _, c := range m.pod.Containers {
			req, lim := c.Resources.Requests, c.Resources.Limits
			rc, rm, lm := req[corev1.ResourceCPU], req[corev1.ResourceMemory], lim[corev1.ResourceMemory]
			if rc.IsZero() || rm.IsZero() || lm.IsZero() || lm.Cmp(rm) < 0 {
				bad(3, "%s: container %s: requests %v, limits %v: want CPU and memory requests and a memory limit ≥ the request", what, c.Name, req, lim)
			}
		}
		// 4
		var in []*manifest
		for _, p := range pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.pdb.Spec.Selector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(m.podLabels)) {
				in = append(in, p)
			}
		}
		role := m.podLabels["role"]
		if len(in) != 1 {
			bad(4, "%s: its pods are in %d PodDisruptionBudgets, want 1", what, len(in))
		} else {
			p := in[0].pdb.Spec
			switch {
			case role == "learner" || role == "learner-peer" || role == "controller":
				if p.MaxUnavailable == nil || p.MaxUnavailable.IntValue() != 0 || p.MaxUnavailable.Type != intstr.Int {
					bad(4, "%s: PodDisruptionBudget %s lets a drain evict a %s, which is not restarted", what, in[0].name, role)
				}
			case m.sts != nil && m.name == "nats":
				if p.MaxUnavailable == nil || p.MaxUnavailable.Type != intstr.Int || p.MaxUnavailable.IntValue() != 1 {
					bad(4, "%s: PodDisruptionBudget %s: want maxUnavailable 1 (two of three keep the quorum)", what, in[0].name)
				}
			}
		}
		// 5
		for k, args := range m.herdArgs {
			addr := flagValue(args, "--metrics-addr")
			if addr == "" {
				continue
			}
			port := addr[strings.LastIndex(addr, ":")+1:]
			c := herdContainer(m, k)
			if !probeCovers(c.ReadinessProbe, c, "/metrics", port) || !probeCovers(c.LivenessProbe, c, "/metrics", port) {
				bad(5, "%s: no readiness and liveness probes on /metrics at port %s", what, port)
			}
			wait, _ := time.ParseDuration(flagValue(args, "--wait"))
			if wait == 0 {
				wait = 60 * time.Second // herd worker's default
			}
			sp := c.StartupProbe
			if !probeCovers(sp, c, "/metrics", port) {
				bad(5, "%s: no startup probe on /metrics: the liveness probe would kill a worker that waits for the run", what)
			} else if budget := time.Duration(sp.InitialDelaySeconds+max(sp.PeriodSeconds, 10)*max(sp.FailureThreshold, 3)) * time.Second; budget <= wait {
				bad(5, "%s: the startup probe gives up after %v, within --wait %v", what, budget, wait)
			}
		}
		if m.sts != nil && m.name == "nats" {
			for _, c := range m.pod.Containers {
				if c.ReadinessProbe == nil || c.LivenessProbe == nil {
					bad(5, "%s: container %s lacks a readiness or liveness probe", what, c.Name)
				}
			}
		}
		// 6
		switch {
		case m.sts != nil && m.name == "nats":
			if !antiAffinity(m, true) {
				bad(6, "%s: its nodes may share a Kubernetes node (no required anti-affinity on kubernetes.io/hostname): losing that node loses the quorum", what)
			}
		case herd && role != "controller" && !antiAffinity(m, false):
			bad(6, "%s: no anti-affinity among its %s pods", what, role)
		}
		// 7
		for _, args := range m.herdArgs {
			if flagValue(args, "--role") != "learner" {
				continue
			}
			stall, err := time.ParseDuration(flagValue(args, "--stall"))
			if err != nil {
				stall = 60 * time.Second // herd worker's default
			}
			if stall < workerWait {
				bad(7, "%s: the learner gives up after %v without samples, while a worker may take --wait %v to join", what, stall, workerWait)
			}
		}
	}
	// 8
	for _, role := range []string{"env", "policy"} {
		m := jobs[role]
		if m == nil || m.job == nil || m.job.Spec.Completions == nil {
			bad(8, "no %s workers' Job with completions", role)
			continue
		}
		n := *m.job.Spec.Completions
		if p := m.job.Spec.Parallelism; p == nil || *p != n {
			bad(8, "Job %s: parallelism %v, completions %d: want every worker at once", m.name, p, n)
		}
		key := "runtime." + role + "_workers"
		if got := lastSet(controller, key); got != strconv.Itoa(int(n)) {
			bad(8, "the controller sets %s %q, but Job %s runs %d", key, got, m.name, n)
		}
	}
	return errs
}

// herdContainer returns the k-th herd container of m's pod.
func herdContainer(m *manifest, k int) *corev1.Container {
	n := 0
	for i := range m.pod.Containers {
		if strings.HasPrefix(m.pod.Containers[i].Image, "herd") {
			if n == k {
				return &m.pod.Containers[i]
			}
			n++
		}
	}
	return nil
}

// Each rule of checkKubernetesRules catches a manifest that breaks it.
func TestDeployKubernetesRules(t *testing.T) {
	all := loadKubernetes(t, filesys.MakeFsOnDisk(), filepath.Join("..", "..", "deploy", "kubernetes"))
	if errs := checkKubernetesRules(all); len(errs) > 0 {
		t.Fatalf("the manifests break the rules: %v", errs)
	}
	named := func(ms []manifest, name string) *manifest {
		for i := range ms {
			if ms[i].name == name && ms[i].pod != nil {
				return &ms[i]
			}
		}
		t.Fatalf("no %s", name)
		return nil
	}
	for _, c := range []struct {
		rule   int
		what   string
		mutate func(ms []manifest) []manifest
	}{
		{1, "env workers restartPolicy OnFailure", func(ms []manifest) []manifest {
			named(ms, "herd-env").pod.RestartPolicy = corev1.RestartPolicyOnFailure
			return ms
		}},
		{2, "learner without fsGroup", func(ms []manifest) []manifest {
			named(ms, "herd-learner").pod.SecurityContext.FSGroup = nil
			return ms
		}},
		{2, "policy worker as root", func(ms []manifest) []manifest {
			named(ms, "herd-policy").pod.SecurityContext = nil
			return ms
		}},
		{3, "env worker without a memory limit", func(ms []manifest) []manifest {
			named(ms, "herd-env").pod.Containers[0].Resources.Limits = nil
			return ms
		}},
		{3, "NATS without requests", func(ms []manifest) []manifest {
			named(ms, "nats").pod.Containers[0].Resources.Requests = nil
			return ms
		}},
		{4, "no disruption budgets", func(ms []manifest) []manifest {
			return slices.DeleteFunc(ms, func(m manifest) bool { return m.pdb != nil })
		}},
		{4, "a learner budget that allows an eviction", func(ms []manifest) []manifest {
			for _, m := range ms {
				if m.pdb != nil && m.name == "herd-run" {
					one := intstr.FromInt32(1)
					m.pdb.Spec.MaxUnavailable = &one
				}
			}
			return ms
		}},
		{5, "env worker without a liveness probe", func(ms []manifest) []manifest {
			named(ms, "herd-env").pod.Containers[0].LivenessProbe = nil
			return ms
		}},
		{5, "learner's readiness probe on another port", func(ms []manifest) []manifest {
			p := named(ms, "herd-learner").pod.Containers[0].ReadinessProbe
			p.HTTPGet.Port = intstr.FromInt32(8080)
			return ms
		}},
		{5, "a startup probe shorter than --wait", func(ms []manifest) []manifest {
			named(ms, "herd-policy").pod.Containers[0].StartupProbe.FailureThreshold = 30
			return ms
		}},
		{6, "NATS anti-affinity only preferred", func(ms []manifest) []manifest {
			a := named(ms, "nats").pod.Affinity.PodAntiAffinity
			for _, term := range a.RequiredDuringSchedulingIgnoredDuringExecution {
				a.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PreferredDuringSchedulingIgnoredDuringExecution,
					corev1.WeightedPodAffinityTerm{Weight: 100, PodAffinityTerm: term})
			}
			a.RequiredDuringSchedulingIgnoredDuringExecution = nil
			return ms
		}},
		{6, "env workers without anti-affinity", func(ms []manifest) []manifest {
			named(ms, "herd-env").pod.Affinity = nil
			return ms
		}},
		{7, "learner with the default --stall", func(ms []manifest) []manifest {
			m := named(ms, "herd-learner")
			a := m.herdArgs[0]
			i := slices.Index(a, "--stall")
			m.herdArgs[0] = slices.Delete(a, i, i+2)
			return ms
		}},
		{8, "env parallelism below completions", func(ms []manifest) []manifest {
			one := int32(1)
			named(ms, "herd-env").job.Spec.Parallelism = &one
			return ms
		}},
		{8, "controller's runtime.env_workers off by one", func(ms []manifest) []manifest {
			m := named(ms, "herd-controller")
			for j, a := range m.herdArgs[0] {
				if strings.HasPrefix(a, "runtime.env_workers=") {
					m.herdArgs[0][j] = "runtime.env_workers=3"
				}
			}
			return ms
		}},
	} {
		errs := checkKubernetesRules(c.mutate(cloneManifests(all)))
		hit := false
		for _, err := range errs {
			hit = hit || strings.HasPrefix(err.Error(), fmt.Sprintf("rule %d:", c.rule))
		}
		if !hit {
			t.Errorf("%s: rule %d found nothing wrong (%v)", c.what, c.rule, errs)
		}
	}
}

// Scaling the env workers is one number, herd-env's completions: with it
// changed (and nothing else), the rendered parallelism and the
// controller's runtime.env_workers follow and every check passes; without
// the kustomization's replacements they do not.
func TestDeployKubernetesScaleOneNumber(t *testing.T) {
	src := filepath.Join("..", "..", "deploy", "kubernetes")
	const one = "completions: 2 # env workers"
	load := func(t *testing.T, edit func(name, text string) string) []manifest {
		t.Helper()
		mem := filesys.MakeFsInMemory()
		files, _ := filepath.Glob(filepath.Join(src, "*.yaml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := mem.WriteFile(filepath.Join("/k", filepath.Base(f)), []byte(edit(filepath.Base(f), string(b)))); err != nil {
				t.Fatal(err)
			}
		}
		return loadKubernetes(t, mem, "/k")
	}
	b, err := os.ReadFile(filepath.Join(src, "workers.yaml"))
	if err != nil || !strings.Contains(string(b), one) {
		t.Fatalf("workers.yaml has no %q: the one number moved (%v)", one, err)
	}
	scale := func(name, text string) string {
		if name == "workers.yaml" {
			return strings.Replace(text, one, "completions: 6 # env workers", 1)
		}
		return text
	}
	ms := load(t, scale)
	errs := append(checkKubernetesRules(ms), checkLearners(ms)...)
	for _, err := range errs {
		t.Errorf("env workers scaled to 6 by completions alone: %v", err)
	}
	for _, m := range ms {
		if m.name == "herd-env" && m.job != nil && (*m.job.Spec.Completions != 6 || *m.job.Spec.Parallelism != 6) {
			t.Errorf("herd-env: completions %d, parallelism %d, want 6", *m.job.Spec.Completions, *m.job.Spec.Parallelism)
		}
		for _, a := range m.herdArgs {
			if a[0] == "launch" && lastSet(a, "runtime.env_workers") != "6" {
				t.Errorf("the controller's runtime.env_workers is %q, want 6", lastSet(a, "runtime.env_workers"))
			}
		}
	}
	// The replacements do it: without them the same edit breaks rule 8.
	ms = load(t, func(name, text string) string {
		if name == "kustomization.yaml" {
			text = text[:strings.Index(text, "replacements:")]
		}
		return scale(name, text)
	})
	if !slices.ContainsFunc(checkKubernetesRules(ms), func(err error) bool { return strings.HasPrefix(err.Error(), "rule 8:") }) {
		t.Error("without the replacements, scaling completions alone passed rule 8")
	}
	// An odd number for runtime.learners 2 is caught too.
	ms = load(t, func(name, text string) string {
		return strings.Replace(text, one, "completions: 3 # env workers", 1)
	})
	if len(checkLearners(ms)) == 0 {
		t.Error("3 env workers for 2 learners passed checkLearners")
	}
}
