// Command bufops runs one replay.Prioritized operation in a loop, for
// instruction and cache-miss counts under valgrind, which load from other
// processes does not change (docs/BENCHMARKS.md, "Replay"):
// two runs, -n 1 and -n 1001, differenced and divided by 1000.
//
// The buffer (1M CartPole-sized slots, random priorities) is filled in one
// goroutine before the loop, and nothing calls runtime.GC, so with GOGC=off
// the two runs differ by the n operations alone. It uses only the public
// API, so the same file builds against older versions of the package.
package main

import (
	"flag"
	"fmt"
	"os"

	"herd/internal/rng"
	"herd/replay"
)

func main() {
	op := flag.String("op", "sample", "insert, sample or update (one batch of -batch per operation)")
	locking := flag.String("locking", "two-lock", "two-lock or global")
	capacity := flag.Int("capacity", 1<<20, "slots")
	batch := flag.Int("batch", 128, "transitions per operation")
	n := flag.Int("n", 1000, "operations")
	flag.Parse()
	lock, err := replay.ParseLocking(*locking)
	if err != nil || *batch < 1 || *n < 1 || (*op != "insert" && *op != "sample" && *op != "update") {
		fmt.Fprintln(os.Stderr, "bufops: want -op insert|sample|update, -locking two-lock|global, -batch ≥ 1, -n ≥ 1", err)
		os.Exit(2)
	}
	p, err := replay.NewPrioritized(replay.Config{Capacity: *capacity, ObsSize: 4, ActSize: 1, Locking: lock})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bufops:", err)
		os.Exit(2)
	}
	r := rng.New(1, "bufops", 0)
	var b replay.Batch
	const fill = 1024
	b.Resize(fill, 4, 1)
	prio := make([]float64, fill)
	for done := 0; done < *capacity; done += fill {
		for i := range prio {
			prio[i] = r.Float64() + 1e-3
		}
		if err := p.AddWithPriorities(&b, prio); err != nil {
			fmt.Fprintln(os.Stderr, "bufops:", err)
			os.Exit(2)
		}
	}
	b.Resize(*batch, 4, 1)
	var s replay.Sample
	if err := p.Sample(&s, *batch, r); err != nil {
		fmt.Fprintln(os.Stderr, "bufops:", err)
		os.Exit(2)
	}
	pr := make([]float64, *batch)
	for i := range pr {
		pr[i] = r.Float64() + 1e-3
	}
	sum := 0
	for i := 0; i < *n; i++ {
		switch *op {
		case "insert":
			err = p.Add(&b)
		case "sample":
			err = p.Sample(&s, *batch, r)
			sum += s.Index[0]
		default:
			_, err = p.UpdatePriorities(s.Index, s.Gen, pr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bufops:", err)
			os.Exit(1)
		}
	}
	fmt.Println(sum)
}
