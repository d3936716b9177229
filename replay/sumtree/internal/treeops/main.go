// Command treeops runs one sum-tree operation in a loop, for instruction
// and cache-miss counts under valgrind, which load from other processes
// does not change (docs/BENCHMARKS.md, "Replay"):
//
//	valgrind --tool=callgrind --cache-sim=yes --toggle-collect='main.loop' \
//	    go-built-treeops -op set -fanout 16 -n 1000
//
// The tree (1M slots by default) is filled and rebuilt before loop runs, in
// one goroutine, so the counts inside loop are the n operations alone;
// divide by n. It uses only the package's public API, so the same file
// builds against older versions of the package for before/after counts.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"herd/internal/rng"
	"herd/replay/sumtree"
)

func main() {
	op := flag.String("op", "set", "set (SetBatch of -batch random slots) or sample (SampleTo of -batch draws)")
	capacity := flag.Int("capacity", 1<<20, "slots")
	fanout := flag.Int("fanout", 8, "K")
	batch := flag.Int("batch", 128, "items per operation")
	n := flag.Int("n", 1000, "operations")
	flag.Parse()
	if *op != "set" && *op != "sample" || *batch < 1 || *n < 1 {
		fmt.Fprintln(os.Stderr, "treeops: want -op set|sample, -batch ≥ 1, -n ≥ 1")
		os.Exit(2)
	}
	t, err := sumtree.New(*capacity, *fanout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "treeops:", err)
		os.Exit(2)
	}
	r := rng.New(1, "treeops", 0)
	for i := range *capacity {
		t.Set(i, r.Float64()+1e-3)
	}
	t.Rebuild()
	const rounds = 1024
	idx := make([]int, *batch*rounds)
	p := make([]float64, len(idx))
	for i := range idx {
		idx[i], p[i] = r.IntN(*capacity), r.Float64()+1e-3
	}
	dst := make([]int, *batch)
	fmt.Println(loop(t, *op == "set", idx, p, dst, r, *n))
}

// loop is the measured part: n operations. It returns a checksum so
// nothing is optimised away.
//
//go:noinline
func loop(t *sumtree.Tree, set bool, idx []int, p []float64, dst []int, r *rand.Rand, n int) int {
	b := len(dst)
	rounds := len(idx) / b
	sum := 0
	for i := 0; i < n; i++ {
		if set {
			o := (i % rounds) * b
			t.SetBatch(idx[o:o+b], p[o:o+b])
		} else {
			t.SampleTo(dst, r)
			sum += dst[0]
		}
	}
	return sum
}
