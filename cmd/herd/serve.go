package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"herd/metrics"
	"herd/replay/persist"
	"herd/service"
	"herd/service/envsvc"
	"herd/service/replaysvc"
)

// serveFlags are the flags every `herd serve` command shares.
type serveFlags struct {
	addr   string
	tls    service.TLSFiles
	maxMsg int
	// metricsAddr, when set, serves reg at http://metricsAddr/metrics.
	metricsAddr string
	reg         *prometheus.Registry
}

// registerer returns the registry of --metrics-addr, nil without it.
func (f *serveFlags) registerer() prometheus.Registerer {
	if f.metricsAddr == "" {
		return nil
	}
	if f.reg == nil {
		f.reg = metrics.NewRegistry()
	}
	return f.reg
}

func (f *serveFlags) register(cmd *cobra.Command, defAddr string) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defAddr, "listen address; a missing host means 127.0.0.1 (say 0.0.0.0:PORT to serve other machines)")
	fl.StringVar(&f.tls.Cert, "tls-cert", "", "server certificate (PEM); enables TLS")
	fl.StringVar(&f.tls.Key, "tls-key", "", "server private key (PEM)")
	fl.StringVar(&f.tls.CA, "tls-client-ca", "", "CA (PEM) that client certificates must chain to; enables mutual TLS")
	fl.IntVar(&f.maxMsg, "max-message-mb", service.MaxMessageBytes>>20, "largest message accepted or sent, MiB")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1)")
}

// run serves what register adds until the command's context ends (Ctrl-C).
func (f *serveFlags) run(cmd *cobra.Command, what string, register func(*grpc.Server)) error {
	if f.maxMsg <= 0 {
		return fmt.Errorf("serve: --max-message-mb %d, want > 0", f.maxMsg)
	}
	conf, err := f.tls.ServerConfig()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var msrv *metrics.Server
	if f.reg != nil {
		if msrv, err = metrics.ServeRegistry(f.metricsAddr, f.reg); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer msrv.Close()
	}
	lis, err := service.Listen(f.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	g := grpc.NewServer(service.ServerOptions(conf, f.maxMsg<<20)...)
	register(g)
	mode := "plaintext"
	if conf != nil {
		mode = "TLS"
		if conf.ClientCAs != nil {
			mode = "mutual TLS"
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "herd: serving %s on %s (%s)\n", what, lis.Addr(), mode)
	if msrv != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "herd: metrics for Prometheus at http://%s/metrics\n", msrv.Addr())
	}
	if err := service.Serve(cmd.Context(), g, lis, 5*time.Second); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if ctx := cmd.Context(); ctx.Err() != nil {
		// Stopped by Ctrl-C or SIGTERM: exit 130, unless the caller has
		// more to save and fails at it.
		return fmt.Errorf("serve: stopped: %w", context.Cause(ctx))
	}
	return nil
}

func newServeCmd() *cobra.Command {
	serve := &cobra.Command{
		Use:   "serve",
		Short: "serve environments or a replay store over gRPC (protocol herd.v1)",
	}
	serve.AddCommand(newServeEnvCmd(), newServeReplayCmd())
	return serve
}

func newServeEnvCmd() *cobra.Command {
	var f serveFlags
	var maxEnvs, maxSessions int
	var shm string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "serve herd's environments; train against them with --env grpc://HOST:PORT/ID",
		Long: `env serves every env id herd knows (CartPole-v1, Pendulum-v1, ...) with the
herd.v1 EnvService protocol (proto/herd/v1/env.proto). A client opens a session
of N envs and steps them with one message per batch of N actions:

  herd train --algo ppo --env grpc://127.0.0.1:7000/CartPole-v1

With --tls-cert/--tls-key clients connect with grpcs://...?ca=CA.pem; with
--tls-client-ca they must also present a certificate (&cert=...&key=...).
With --shm NAME, clients on the same host may also use --env shm://NAME/ID:
batches travel through shared memory instead of the network.`,
		Example: `  herd serve env --addr 127.0.0.1:7000
  herd serve env --addr 0.0.0.0:7000 --tls-cert srv.pem --tls-key srv.key --tls-client-ca ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc := flagCheck{cmd: "serve env"}
			fc.atLeast("max-envs", 1, int64(maxEnvs))
			fc.atLeast("max-sessions", 1, int64(maxSessions))
			if err := fc.err(); err != nil {
				return err
			}
			srv := envsvc.New(envsvc.Config{MaxEnvs: maxEnvs, MaxSessions: maxSessions})
			if reg := f.registerer(); reg != nil {
				if err := srv.RegisterMetrics(reg); err != nil {
					return fmt.Errorf("serve: %w", err)
				}
			}
			if shm == "" {
				return f.run(cmd, "herd envs", srv.Register)
			}
			lis, err := envsvc.ListenShm(shm)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- srv.ServeShm(ctx, lis) }()
			fmt.Fprintf(cmd.OutOrStdout(), "herd: serving herd envs on shm %s\n", shm)
			cmd.SetContext(ctx)
			err = f.run(cmd, "herd envs", srv.Register)
			cancel()
			return errors.Join(err, <-done)
		},
	}
	f.register(cmd, "127.0.0.1:7000")
	cmd.Flags().StringVar(&shm, "shm", "", "also serve same-host clients through shared memory: --env shm://NAME/ID (Linux)")
	cmd.Flags().IntVar(&maxEnvs, "max-envs", envsvc.DefaultMaxEnvs, "most envs one session may open")
	cmd.Flags().IntVar(&maxSessions, "max-sessions", envsvc.DefaultMaxSessions, "most live sessions; more are refused with RESOURCE_EXHAUSTED")
	return cmd
}

func newServeReplayCmd() *cobra.Command {
	var f serveFlags
	var opts persist.Options
	var mode, durability string
	var samplers []string
	var maxBatch int
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "serve a persistent replay store (Push, Get, Sample, UpdatePriorities, Snapshot)",
		Long: `replay opens a persistent replay store (herd/replay/persist) in --dir and serves it
with the herd.v1 ReplayService protocol (proto/herd/v1/replay.proto) to any number
of clients: Go (herd/service/replaysvc.Client) or Python (herd_env.replay).

Samplers are NAME=uniform, NAME=prioritized:FIELD:ALPHA or
NAME=prioritytime:FIELD:DECAY; the first is the default of Sample. Records pushed
must carry every field a prioritized sampler reads.`,
		Example: `  herd serve replay --dir /data/replay --mode hybrid --addr 127.0.0.1:7100
  herd serve replay --dir /data/replay --sampler per=prioritized:priority:0.6 --sampler uniform=uniform \
      --snapshot-url file:///backups/replay`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc := flagCheck{cmd: "serve replay"}
			fc.atLeast("max-batch", 1, int64(maxBatch))
			if cmd.Flags().Changed("cache-mb") {
				fc.atLeast("cache-mb", 1, int64(opts.CacheMB)) // left out: the default
			}
			if err := fc.err(); err != nil {
				return err
			}
			var err error
			if opts.Mode, err = persist.ParseMode(mode); err != nil {
				return fmt.Errorf("serve replay: %w", err)
			}
			switch durability {
			case "writeback":
				opts.Durability = persist.WriteBack
			case "sync":
				opts.Durability = persist.Sync
			default:
				return fmt.Errorf("serve replay: --durability %q, want writeback or sync", durability)
			}
			for _, spec := range samplers {
				sp, err := replaysvc.ParseSampler(spec)
				if err != nil {
					return fmt.Errorf("serve replay: %w", err)
				}
				opts.Samplers = append(opts.Samplers, sp)
			}
			opts.EnsureDefaults()
			opts.Registerer = f.registerer()
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			store, err := persist.Open(cmd.Context(), opts)
			if err != nil {
				return fmt.Errorf("serve replay: %w", err)
			}
			if info, ok := store.Restored(); ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "serve replay: restored snapshot %d from %s (%d records)\n", info.Snapshot, opts.RestoreFrom, store.Len())
				if len(info.Skipped) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "serve replay: warning: the %d newer snapshot(s) up to %d were skipped: %v\n",
						len(info.Skipped), info.Newest, errors.Join(info.Skipped...))
				}
			}
			srv, err := replaysvc.New(replaysvc.Config{Store: store, Samplers: opts.Samplers, Mode: opts.Mode,
				MaxValueBytes: opts.MaxValueBytes, MaxBatch: maxBatch, Registerer: opts.Registerer})
			if err != nil {
				store.Close()
				return fmt.Errorf("serve replay: %w", err)
			}
			// A store whose disk failed keeps serving reads and refuses
			// writes (RESOURCE_EXHAUSTED for a full disk); say so once.
			watchDone := make(chan struct{})
			defer close(watchDone)
			go func() {
				select {
				case <-store.Failed():
					fmt.Fprintf(cmd.ErrOrStderr(), "serve replay: the store refuses writes from now on: %v; reads are still served; "+
						"stop the server once clients are done, free space and restart it\n", store.Err())
				case <-watchDone:
				}
			}()
			serveErr := f.run(cmd, fmt.Sprintf("replay store %s (%v)", opts.Dir, opts.Mode), srv.Register)
			closeErr := store.Close()
			if werr := store.Err(); werr != nil {
				lost := "every acknowledged record is durable"
				if opts.Durability == persist.WriteBack {
					lost = "records acknowledged since the last successful Flush were not written"
				}
				return fmt.Errorf("serve replay: the store failed: %v (%s; closing: %v)", werr, lost, closeErr)
			}
			if closeErr != nil {
				// %v: a store that did not close cleanly is a failure,
				// never a clean interruption.
				return fmt.Errorf("serve replay: closing the store: %v (serving: %v)", closeErr, serveErr)
			}
			return serveErr
		},
	}
	f.register(cmd, "127.0.0.1:7100")
	fl := cmd.Flags()
	fl.StringVar(&opts.Dir, "dir", "", "store directory (required unless --mode memory)")
	fl.StringVar(&mode, "mode", "hybrid", "hybrid, memory or disk")
	fl.IntVar(&opts.CacheMB, "cache-mb", 0, "hybrid cache size, MiB (default 256)")
	fl.StringVar(&durability, "durability", "writeback", "writeback (Push returns once queued) or sync (once durable)")
	fl.StringArrayVar(&samplers, "sampler", nil, "sampler NAME=KIND[:FIELD:PARAM], repeatable (default uniform=uniform)")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the samplers' random streams")
	fl.StringVar(&opts.SnapshotURL, "snapshot-url", "", "where Snapshot uploads (file://; s3://, gs://, azblob://, hdfs:// in a herd built with -tags cloud)")
	fl.DurationVar(&opts.SnapshotEvery, "snapshot-every", 0, "automatic snapshot period with --snapshot-url (default 3m; negative: none)")
	fl.StringVar(&opts.RestoreFrom, "restore-from", "", "restore the newest snapshot at this URL into an empty --dir")
	fl.IntVar(&maxBatch, "max-batch", replaysvc.DefaultMaxBatch, "most records in one Push, Get, UpdatePriorities or Sample")
	return cmd
}
