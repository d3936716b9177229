package main

// The deployment files in deploy/ (#13) must be valid Kubernetes objects and
// every herd command line in them must parse with herd's own flags, so a
// renamed flag breaks this test rather than a cluster.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
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
	herdArgs   [][]string // the herd containers' argument lists
	claims     []string   // persistentVolumeClaim names its pods mount
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
		pod = &o.Spec.Template.Spec
	case "Deployment":
		var o appsv1.Deployment
		err = yaml.UnmarshalStrict(doc, &o)
		pod = &o.Spec.Template.Spec
	case "Job":
		var o batchv1.Job
		err = yaml.UnmarshalStrict(doc, &o)
		pod = &o.Spec.Template.Spec
	case "Service":
		var o corev1.Service
		err = yaml.UnmarshalStrict(doc, &o)
	case "ConfigMap":
		var o corev1.ConfigMap
		err = yaml.UnmarshalStrict(doc, &o)
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
		for _, c := range pod.Containers {
			if strings.HasPrefix(c.Image, "herd") {
				m.herdArgs = append(m.herdArgs, append(append([]string(nil), c.Command...), c.Args...))
			}
		}
		for _, v := range pod.Volumes {
			if v.PersistentVolumeClaim != nil {
				m.claims = append(m.claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	return m, nil
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
	var claims []string
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			m, err := decodeManifest(doc)
			if err != nil {
				t.Errorf("%s doc %d: %v", f, i, err)
				continue
			}
			kinds[m.kind]++
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
	for _, k := range []string{"StatefulSet", "Service", "Deployment", "Job", "ConfigMap", "PersistentVolumeClaim"} {
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

func TestDeployCompose(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image   string   `json:"image"`
			Command []string `json:"command"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "herd") {
			continue
		}
		n++
		if err := parseHerdArgs(s.Command); err != nil {
			t.Errorf("compose service %s: %v", name, err)
		}
	}
	if n < 4 {
		t.Errorf("compose has %d herd services, want the controller and the three roles", n)
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
