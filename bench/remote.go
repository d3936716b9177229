package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"herd/replay/persist"
	"herd/service/envsvc"
	"herd/service/replaysvc"
)

// newRemoteCmd is `herd bench remote env|replay`: the gRPC
// services against their in-process counterparts (logic in envsvc.Bench and
// replaysvc.Bench).
func newRemoteCmd() *cobra.Command {
	remote := &cobra.Command{
		Use:   "remote",
		Short: "remote env steps/s vs local; replay service push/sample calls/s and latency",
	}
	remote.AddCommand(newRemoteEnvCmd(), newRemoteReplayCmd())
	return remote
}

func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a list of positive integers", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func newRemoteEnvCmd() *cobra.Command {
	var cfg envsvc.BenchConfig
	var sizes string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: "env steps/s through an env server vs a local SyncVector, per envs-per-message",
		Long: `Steps a local SyncVector and a RemoteVector of the same size (one message per
batch of actions) with random actions, alternating the two in every round, and
prints the medians. Without --addr it serves herd's envs in this process on a
loopback port; with --addr it measures that server (for example
python3 -m herd_env.serve, with --id naming its env and --local-id the herd env
to compare with).`,
		Example: `  herd bench remote env
  herd bench remote env --addr 127.0.0.1:7000 --id CartPole --local-id CartPole-v1
  herd bench remote env --shm envs --id CartPole --local-id CartPole-v1 --num-envs 1,8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.NumEnvs, err = parseInts("--num-envs", sizes); err != nil {
				return err
			}
			rows, err := envsvc.Bench(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeRows(cmd.OutOrStdout(), asJSON, rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", "", "server to measure (default: herd's, in this process)")
	f.StringVar(&cfg.Shm, "shm", "", "measure this shared-memory name (herd_env.serve --shm NAME) instead of --addr")
	f.IntVar(&cfg.Inflight, "inflight", 1, "sessions in flight per vector (the id's inflight=K)")
	f.StringVar(&cfg.EnvID, "id", "CartPole-v1", "env id on the server")
	f.StringVar(&cfg.LocalID, "local-id", "", "herd env id of the local rows (default --id)")
	f.StringVar(&sizes, "num-envs", "1,16,64", "envs per message, comma-separated")
	f.DurationVar(&cfg.Duration, "duration", 0, "time per measurement (default 1s)")
	f.IntVar(&cfg.Rounds, "rounds", 3, "alternating rounds; rows give medians")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed for envs and random actions")
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func newRemoteReplayCmd() *cobra.Command {
	var cfg replaysvc.BenchConfig
	var values, clients, mode string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "replay service push and sample calls/s with p50/p99 latency, per value size and client count",
		Long: `Pushes --ops records (one per call) and then makes --ops Sample calls of
--sample-batch records, split among N concurrent clients, for each value size
and client count, and reports calls/s and the p50/p99 latency of one call.
Without --addr each case gets a fresh store (--mode) served in this process on
a loopback port.`,
		Example: `  herd bench remote replay
  herd bench remote replay --values 1024,44032 --clients 1,8 --mode hybrid`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc := flagCheck{cmd: "bench remote replay"}
			fc.atLeast("ops", 1, int64(cfg.Ops))
			fc.atLeast("sample-batch", 1, int64(cfg.SampleBatch))
			if err := fc.err(); err != nil {
				return err
			}
			var err error
			if cfg.ValueBytes, err = parseInts("--values", values); err != nil {
				return err
			}
			if cfg.Clients, err = parseInts("--clients", clients); err != nil {
				return err
			}
			if cfg.Mode, err = persist.ParseMode(mode); err != nil {
				return err
			}
			rows, err := replaysvc.Bench(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeRows(cmd.OutOrStdout(), asJSON, rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", "", "server to measure (needs a sampler named uniform; default: a fresh store in this process)")
	f.StringVar(&mode, "mode", "hybrid", "store mode when serving in this process: hybrid, memory or disk")
	f.StringVar(&values, "values", "1024,44032", "value sizes in bytes, comma-separated")
	f.StringVar(&clients, "clients", "1,8", "concurrent clients, comma-separated")
	f.IntVar(&cfg.Ops, "ops", 4000, "calls per phase, split among the clients")
	f.IntVar(&cfg.SampleBatch, "sample-batch", 32, "records per Sample call")
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}
