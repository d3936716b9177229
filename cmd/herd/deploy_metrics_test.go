package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// checkScrapeAnnotations reports what a manifest lacks for Prometheus's
// pod discovery: a worker pod (a herd container with --role) serves
// --metrics-addr on an address the pod IP reaches, declares the port, and
// carries prometheus.io/scrape "true", prometheus.io/port (that port) and
// prometheus.io/path /metrics; and no pod asks to be scraped on a port no
// herd container serves.
func checkScrapeAnnotations(m manifest) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s %s: "+format, append([]any{m.kind, m.name}, a...)...))
	}
	var ann map[string]string
	switch {
	case m.job != nil:
		ann = m.job.Spec.Template.Annotations
	case m.sts != nil:
		ann = m.sts.Spec.Template.Annotations
	}
	served := map[string]bool{}
	worker := false
	for k, args := range m.herdArgs {
		if flagValue(args, "--role") == "" {
			continue
		}
		worker = true
		addr := flagValue(args, "--metrics-addr")
		if addr == "" {
			bad("a worker without --metrics-addr")
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			bad("--metrics-addr %q: %v", addr, err)
			continue
		}
		if host == "" || host == "127.0.0.1" || host == "localhost" {
			bad("--metrics-addr %q binds loopback: Prometheus cannot scrape the pod IP", addr)
		}
		served[port] = true
		var c *corev1.Container // the k-th herd container, whose args these are
		for i, n := 0, 0; i < len(m.pod.Containers) && c == nil; i++ {
			if strings.HasPrefix(m.pod.Containers[i].Image, "herd") {
				if n == k {
					c = &m.pod.Containers[i]
				}
				n++
			}
		}
		declared := false
		for _, p := range c.Ports {
			declared = declared || strconv.Itoa(int(p.ContainerPort)) == port
		}
		if !declared {
			bad("the container does not declare port %s", port)
		}
	}
	if worker {
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || !served[ann["prometheus.io/port"]] {
			bad("pod annotations %v: want prometheus.io/scrape \"true\", prometheus.io/path /metrics and prometheus.io/port one of %v", ann, served)
		}
	} else if ann["prometheus.io/scrape"] == "true" && !served[ann["prometheus.io/port"]] {
		bad("asks to be scraped on port %q, which no herd container serves", ann["prometheus.io/port"])
	}
	return errs
}

// Every worker pod of deploy/kubernetes is annotated for scraping.
func TestDeployKubernetesScrapeAnnotations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	workers := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			m, err := decodeManifest(doc)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, args := range m.herdArgs {
				if flagValue(args, "--role") != "" {
					workers++
				}
			}
			for _, err := range checkScrapeAnnotations(m) {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	if workers < 3 {
		t.Errorf("%d worker containers, want the env, policy and learner Jobs", workers)
	}
	// The check itself: a worker Job without the annotations fails it.
	m, err := decodeManifest([]byte(`apiVersion: batch/v1
kind: Job
metadata: {name: w}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: herd
          image: herd:latest
          args: ["worker", "--role", "env", "--metrics-addr", "127.0.0.1:9464"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if errs := checkScrapeAnnotations(m); len(errs) != 3 {
		t.Errorf("an unannotated loopback worker: %d errors, want 3 (loopback, no port, no annotations): %v", len(errs), errs)
	}
}
