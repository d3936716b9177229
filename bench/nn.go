package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"herd/nn"
)

// newNNCmd measures MLP forward, forward+backward and
// forward+backward+Adam per GEMM backend (logic in nn.BenchMLP).
func newNNCmd() *cobra.Command {
	var (
		asJSON   bool
		nets     []string
		batches  string
		ops      []string
		backends []string
		in, out  int
		act      string
		minTime  time.Duration
		repeats  int
		stat     string
		clock    string
	)
	cmd := &cobra.Command{
		Use:   "nn",
		Short: "benchmark nn networks: forward, fwd+bwd, fwd+bwd+Adam per GEMM backend",
		Long: `Times forward ("forward"), forward+backward ("fwd_bwd") and
forward+backward+Adam ("fwd_bwd_adam") for each net, batch and GEMM backend.
A net is an MLP's hidden layers ("64-64") or a convolution preset:
"conv-minatar" (MinAtar's 16×3×3 on 4×10×10 frames), "conv-nature" (Nature
DQN's three convolutions on 4×84×84 frames), ReLU between, or "conv-impala"
(IMPALA's three residual stages on 4×10×10 frames); no heads. "lstm" and
"gru" time one recurrent layer (64 inputs, 128 hidden) over 128 steps of 8
sequences, backward through every step, whatever --batches says.
Backends are timed round robin, --repeats runs each, and the minimum (or
--stat median) is reported, so ratios between backends are fair on a busy
machine. The gflops column is the rate of the matrix products (MLPs and
the recurrent gate products; three products per layer for the training ops), peak_gflops the machine's
float32 peak for GOMAXPROCS cores, measured on a loop of FMAs. Run with
HERD_KERNELS=avx2-fma or portable to time a slower kernel path. For the one-core
figures in docs/BENCHMARKS.md run with GOMAXPROCS=1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := flagCheck{cmd: "bench nn"}
			c.atLeast("in", 1, int64(in))
			c.atLeast("out", 1, int64(out))
			c.atLeast("repeats", 1, int64(repeats))
			c.atLeast("min-time", 1, int64(minTime))
			if err := c.err(); err != nil {
				return err
			}
			var bs []int
			for _, f := range strings.Split(batches, ",") {
				b, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || b <= 0 {
					return fmt.Errorf("bench nn: --batches %q: want positive integers like 1,256", batches)
				}
				bs = append(bs, b)
			}
			a, err := nn.ParseActivation(act)
			if err != nil {
				return fmt.Errorf("bench nn: --act: %w", err)
			}
			rows, err := nn.BenchMLP(cmd.Context(), nn.BenchOptions{Nets: nets, In: in, Out: out, Act: a, Batches: bs, Ops: ops,
				Backends: backends, MinTime: minTime, Repeats: repeats, Stat: stat, Clock: clock})
			if err != nil {
				return fmt.Errorf("bench nn: %w", err)
			}
			return writeRows(cmd.OutOrStdout(), asJSON, rows)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	f.StringSliceVar(&nets, "nets", []string{"64-64", "256-256"}, "hidden layer specs (64-64), conv presets (conv-minatar, conv-nature, conv-impala) or lstm, gru")
	f.StringVar(&batches, "batches", "1,32,256,1024", "batch sizes (training ops run at batches ≥ 32)")
	f.StringSliceVar(&ops, "ops", []string{nn.OpForward, nn.OpFwdBwd, nn.OpFwdBwdAdam}, "ops to time")
	f.StringSliceVar(&backends, "backends", nil, "GEMM backends (default: all in this build but the slow portable \"go\"; available: "+strings.Join(nn.GemmBackends(), ",")+")")
	f.IntVar(&in, "in", 4, "input width")
	f.IntVar(&out, "out", 2, "output width")
	f.StringVar(&act, "act", "relu", "hidden activation: relu, tanh, sigmoid, identity")
	f.DurationVar(&minTime, "min-time", 30*time.Millisecond, "duration of each timing run")
	f.IntVar(&repeats, "repeats", 15, "timing runs per case, interleaved across backends")
	f.StringVar(&stat, "stat", "min", "statistic over the repeats: min (best on a shared machine) or median")
	f.StringVar(&clock, "clock", "wall", "what a timing run measures: wall, or cpu (the process's CPU time: on a machine other processes load, it leaves out the time they hold the cores)")
	return cmd
}
