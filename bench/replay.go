package bench

import (
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"herd/internal/sysmem"
	"herd/replay"
	rbench "herd/replay/bench"
	"herd/replay/sumtree"
)

// newReplayCmd is `herd bench replay`: the sum tree alone
// (tree_set, tree_sample), the Prioritized buffer (insert, sample, update,
// mixed), and with --safety the numerical-safety run. The logic lives in
// herd/replay/bench; this file only parses flags and prints rows.
func newReplayCmd() *cobra.Command {
	var (
		capacities []int
		fanouts    []int
		variants   []string
		threads    []int
		ops        []string
		batch      int
		actorBatch int
		seconds    float64
		stat       string
		asJSON     bool
		seed       uint64
		plotDir    string
		safety     bool
		draws      int64
		filled     float64
		ratio      float64
		decades    float64
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "benchmark the K-ary sum tree and the replay buffers",
		Long: `Benchmark the K-ary sum tree (ops tree_set, tree_sample: B priorities set /
B prefix-sum draws per op, one thread) and the Prioritized buffer with
CartPole-sized transitions (insert, sample, update: one batch per op, one
thread; mixed: --threads goroutines, T/2 learners sampling and updating
--batch, the rest actors inserting --actor-batch, with --ratio sampled items per
inserted item held by a replay.RateLimiter so every variant does the same mix of
work). ns_per_op is per batch (per learner batch for mixed); items_per_s counts
inserted plus sampled items.

Timings are taken in short windows, interleaved across fanouts, and reduced by
--stat (median, or min: the least disturbed window on a shared machine).

Tree rows at 1M slots and batch 128 are followed by a comparison with the
C++ K-ary tree of PAL (Zhang et al. 2021; K=16, float32): its tree_set 0.71 µs
and tree_sample 18.6 µs per batch are recorded figures (docs/BENCHMARKS.md,
measured on the reference machine alternating with herd), not re-measured
here; herd_over_ref below 1 means herd is faster.

With --safety: draws on a tree of the first --capacity slots, --filled of them
holding priorities, under continuous random updates, counting draws outside
the filled range or on a zero priority (--draws, e.g. 1e8 on 1e7 slots).`,
		Example: `  herd bench replay --ops tree_set,tree_sample --capacity 1048576 --fanout 2,4,8,16,32,64
  herd bench replay --ops mixed --threads 3,4 --variant two-lock,global
  herd bench replay --safety --capacity 10000000 --draws 100000000
  herd bench replay --safety --capacity 1000000 --draws 50000000 --decades 83`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c := flagCheck{cmd: "bench replay"}
			c.atLeast("capacity", 1, ints(capacities...)...)
			c.atLeast("fanout", 2, ints(fanouts...)...)
			c.atLeast("threads", 1, ints(threads...)...)
			c.atLeast("batch", 1, int64(batch))
			c.atLeast("actor-batch", 1, int64(actorBatch))
			c.atLeast("draws", 1, draws)
			c.finite("ratio", ratio, 0, math.MaxFloat64)
			c.finite("seconds", seconds, 0, 1e9)
			c.finite("filled", filled, math.SmallestNonzeroFloat64, 1)
			if len(capacities) == 0 || len(fanouts) == 0 || len(threads) == 0 {
				c.bad("capacity/fanout/threads", "give at least one value each")
			}
			if err := c.err(); err != nil {
				return err
			}
			// a sum tree, its inputs and a buffer of CartPole rows: ~64 B a slot
			if err := sysmem.Check(64*float64(slices.Max(capacities))*float64(len(fanouts)),
				fmt.Sprintf("bench replay: --capacity %d × %d fanouts", slices.Max(capacities), len(fanouts))); err != nil {
				return err
			}
			st := rbench.Stat(stat)
			if st != rbench.Median && st != rbench.Min {
				return fmt.Errorf("bench replay: --stat %q: want median or min", stat)
			}
			if safety {
				if len(capacities) != 1 || len(fanouts) != 1 {
					return fmt.Errorf("bench replay --safety: give one --capacity and one --fanout")
				}
				row, err := rbench.Safety(ctx, rbench.SafetyConfig{Capacity: capacities[0], Fanout: fanouts[0],
					Filled: int(filled * float64(capacities[0])), Draws: draws, Batch: batch, Seed: seed, Seconds: seconds,
					Decades: decades})
				if err != nil {
					return err
				}
				return writeRows(cmd.OutOrStdout(), asJSON, []rbench.SafetyRow{row})
			}
			var locks []replay.Locking
			for _, v := range variants {
				l, err := replay.ParseLocking(v)
				if err != nil {
					return fmt.Errorf("bench replay: --variant: %w", err)
				}
				locks = append(locks, l)
			}
			var treeOps, bufOps []string
			for _, op := range ops {
				switch op {
				case "tree_set", "tree_sample", "tree":
					treeOps = append(treeOps, op)
				case "insert", "sample", "update", "mixed":
					bufOps = append(bufOps, op)
				default:
					return fmt.Errorf("bench replay: --ops: unknown op %q", op)
				}
			}
			var rows []rbench.Row
			if len(treeOps) > 0 {
				tr, err := rbench.TreeRows(ctx, rbench.TreeConfig{Capacities: capacities, Fanouts: fanouts, Batch: batch,
					Seconds: seconds, Stat: st, Seed: seed})
				if err != nil {
					return err
				}
				for _, r := range tr {
					for _, op := range treeOps {
						if op == "tree" || op == r.Op {
							rows = append(rows, r)
							break
						}
					}
				}
			}
			if len(bufOps) > 0 {
				br, err := rbench.BufferRows(ctx, rbench.BufferConfig{Capacities: capacities, Fanouts: fanouts,
					Variants: locks, Batch: batch, ActorBatch: actorBatch, Threads: threads, Ops: bufOps, Ratio: ratio,
					Seconds: seconds, Stat: st, Seed: seed})
				if err != nil {
					return err
				}
				rows = append(rows, br...)
			}
			if err := writeRows(cmd.OutOrStdout(), asJSON, rows); err != nil {
				return err
			}
			// The tree rows at 1M slots and batch 128 beside PAL's C++
			// tree's recorded figures (not re-measured).
			if ref := rbench.RefRows(rows); len(ref) > 0 {
				if !asJSON {
					fmt.Fprintln(cmd.OutOrStdout())
					fmt.Fprintln(cmd.OutOrStdout(), rbench.RefNote)
				}
				if err := writeRows(cmd.OutOrStdout(), asJSON, ref); err != nil {
					return err
				}
			}
			if plotDir != "" {
				if err := os.MkdirAll(plotDir, 0o755); err != nil {
					return err
				}
				files, err := rbench.Plot(plotDir, rows)
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(cmd.ErrOrStderr(), "wrote", f)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&capacities, "capacity", []int{1 << 20}, "capacities N (list)")
	f.IntSliceVar(&fanouts, "fanout", []int{sumtree.DefaultFanout}, "sum tree fanouts K (list)")
	f.StringSliceVar(&variants, "variant", []string{"two-lock", "global"}, "buffer locking: two-lock, global (list)")
	f.IntSliceVar(&threads, "threads", []int{3}, "goroutines in the mixed workload (list)")
	f.StringSliceVar(&ops, "ops", []string{"tree_set", "tree_sample", "insert", "sample", "update", "mixed"}, "ops to run (list)")
	f.IntVar(&batch, "batch", 128, "batch size B")
	f.IntVar(&actorBatch, "actor-batch", 32, "insert batch of the actors in the mixed workload")
	f.Float64Var(&ratio, "ratio", 0, "mixed: samples per insert held by a rate limiter (0: actors and learners run free)")
	f.Float64Var(&seconds, "seconds", 2, "measuring time per configuration (safety: time limit, 0 none)")
	f.StringVar(&stat, "stat", "median", "reduce per-window timings by median or min")
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.StringVar(&plotDir, "plot", "", "write PNG figures (Fig. 9, Fig. 10, growth) into this directory")
	f.BoolVar(&safety, "safety", false, "run the numerical-safety check instead")
	f.Int64Var(&draws, "draws", 100_000_000, "safety: number of draws")
	f.Float64Var(&filled, "filled", 0.95, "safety: fraction of the capacity holding priorities")
	f.Float64Var(&decades, "decades", 12, "safety: spread of the log-uniform priorities in decades (83: 1e-45 … 1e38, the float32 leaves' range)")
	return cmd
}
