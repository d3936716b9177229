package bench

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"herd/internal/sysmem"
	"herd/replay/persist"
)

// newPersistCmd measures replay/persist: push (counted when applied),
// get and sample in each mode; see docs/BENCHMARKS.md.
func newPersistCmd() *cobra.Command {
	var (
		asJSON, sync, snapshot, verbose bool
		modes                           []string
		cfg                             persist.BenchConfig
	)
	cmd := &cobra.Command{
		Use:   "persist",
		Short: "benchmark the persistent replay store (push/get/sample per mode)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := flagCheck{cmd: "bench persist"}
			c.atLeast("value-bytes", 1, int64(cfg.ValueBytes))
			c.atLeast("keys", 1, int64(cfg.Keys))
			c.atLeast("cache-mb", 1, int64(cfg.CacheMB))
			c.atLeast("sample-n", 1, int64(cfg.SampleN))
			c.atLeast("reads", 1, int64(cfg.Reads))
			if err := c.err(); err != nil {
				return err
			}
			if err := sysmem.Check(float64(cfg.Keys)*float64(cfg.ValueBytes), fmt.Sprintf("bench persist: --keys %d × --value-bytes %d", cfg.Keys, cfg.ValueBytes)); err != nil {
				return err
			}
			for _, s := range modes {
				m, err := persist.ParseMode(s)
				if err != nil {
					return err
				}
				cfg.Modes = append(cfg.Modes, m)
			}
			if sync {
				cfg.Durability = persist.Sync
			}
			cfg.Snapshot = snapshot
			if verbose {
				cfg.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
			}
			rows, err := persist.Bench(cmd.Context(), cfg)
			if werr := writeRows(cmd.OutOrStdout(), asJSON, rows); err == nil {
				err = werr
			}
			if cerr := cmd.Context().Err(); err == nil && cerr != nil {
				// Stopped after the last check: the rows are all there,
				// but the command did not end by itself.
				err = fmt.Errorf("bench persist: %w", cerr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "one JSON object per line")
	f.StringSliceVar(&modes, "modes", []string{"memory", "disk", "hybrid"}, "modes to run")
	f.IntVar(&cfg.ValueBytes, "value-bytes", 43000, "value size in bytes")
	f.IntVar(&cfg.Keys, "keys", 30000, "keys pushed")
	f.IntVar(&cfg.CacheMB, "cache-mb", 256, "hybrid cache size in MiB")
	f.IntVar(&cfg.SampleN, "sample-n", 32, "records per Sample call")
	f.IntVar(&cfg.Reads, "reads", 100000, "Get calls and sampled records per mode")
	f.BoolVar(&sync, "sync", false, "Sync durability (push waits for a synced WAL write)")
	f.BoolVar(&snapshot, "snapshot", false, "also measure push latency during a snapshot of the whole store")
	f.StringVar(&cfg.Dir, "dir", os.TempDir(), "parent directory for the temporary stores")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed")
	f.BoolVar(&verbose, "progress", false, "progress on stderr")
	return cmd
}
