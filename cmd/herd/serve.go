package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"herd/service"
	"herd/service/envsvc"
	"herd/service/replaysvc"
)

// addServeFlags binds the flags every `herd serve` command shares to o.
func addServeFlags(cmd *cobra.Command, o *service.ServeOptions, defAddr string) {
	fl := cmd.Flags()
	fl.StringVar(&o.Addr, "addr", defAddr, "listen address; a missing host means 127.0.0.1 (say 0.0.0.0:PORT to serve other machines)")
	fl.StringVar(&o.TLS.Cert, "tls-cert", "", "server certificate (PEM); enables TLS")
	fl.StringVar(&o.TLS.Key, "tls-key", "", "server private key (PEM)")
	fl.StringVar(&o.TLS.CA, "tls-client-ca", "", "CA (PEM) that client certificates must chain to; enables mutual TLS")
	fl.IntVar(&o.MaxMessageMB, "max-message-mb", service.MaxMessageBytes>>20, "largest message accepted or sent, MiB")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1)")
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
	var o envsvc.RunOptions
	cmd := &cobra.Command{
		Use:   "env",
		Short: "serve herd's environments; train against them with --env grpc://HOST:PORT/ID",
		Long: `env serves every env id herd knows (CartPole-v1, Pendulum-v1, ...) with the
herd.v1 EnvService protocol (proto/herd/v1/env.proto). A client opens a session
of N envs and steps them with one message per batch of N actions:

  herd train --algo ppo --env grpc://127.0.0.1:7000/CartPole-v1

The multi-agent ids (mpe/simple_spread_v3, ...) are served as multi-agent
envs: --env 'grpc://127.0.0.1:7000/mpe/simple_spread_v3?agent_id=true'.

With --tls-cert/--tls-key clients connect with grpcs://...?ca=CA.pem; with
--tls-client-ca they must also present a certificate (&cert=...&key=...).
With --shm NAME, clients on the same host may also use --env shm://NAME/ID:
batches travel through shared memory instead of the network (a multi-agent
id's messages through a Unix-domain socket).`,
		Example: `  herd serve env --addr 127.0.0.1:7000
  herd serve env --addr 0.0.0.0:7000 --tls-cert srv.pem --tls-key srv.key --tls-client-ca ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return envsvc.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	addServeFlags(cmd, &o.Serve, "127.0.0.1:7000")
	cmd.Flags().StringVar(&o.Shm, "shm", "", "also serve same-host clients through shared memory: --env shm://NAME/ID (Linux)")
	cmd.Flags().IntVar(&o.Config.MaxEnvs, "max-envs", envsvc.DefaultMaxEnvs, "most envs one session may open")
	cmd.Flags().IntVar(&o.Config.MaxSessions, "max-sessions", envsvc.DefaultMaxSessions, "most live sessions; more are refused with RESOURCE_EXHAUSTED")
	return cmd
}

func newServeReplayCmd() *cobra.Command {
	var o replaysvc.RunOptions
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
			if cmd.Flags().Changed("cache-mb") && o.Store.CacheMB < 1 { // 0 is the default, left out
				return fmt.Errorf("serve replay: --cache-mb: must be >= 1, got %d", o.Store.CacheMB)
			}
			o.Stderr = cmd.ErrOrStderr()
			return replaysvc.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	addServeFlags(cmd, &o.Serve, "127.0.0.1:7100")
	fl := cmd.Flags()
	fl.StringVar(&o.Store.Dir, "dir", "", "store directory (required unless --mode memory)")
	fl.StringVar(&o.Mode, "mode", "hybrid", "hybrid, memory or disk")
	fl.IntVar(&o.Store.CacheMB, "cache-mb", 0, "hybrid cache size, MiB (default 256)")
	fl.StringVar(&o.Durability, "durability", "writeback", "writeback (Push returns once queued) or sync (once durable)")
	fl.StringArrayVar(&o.Samplers, "sampler", nil, "sampler NAME=KIND[:FIELD:PARAM], repeatable (default uniform=uniform)")
	fl.Uint64Var(&o.Store.Seed, "seed", 1, "seed of the samplers' random streams")
	fl.StringVar(&o.Store.SnapshotURL, "snapshot-url", "", "where Snapshot uploads (file://; s3://, gs://, azblob://, hdfs:// in a herd built with -tags cloud)")
	fl.DurationVar(&o.Store.SnapshotEvery, "snapshot-every", 0, "automatic snapshot period with --snapshot-url (default 3m; negative: none)")
	fl.StringVar(&o.Store.RestoreFrom, "restore-from", "", "restore the newest snapshot at this URL into an empty --dir")
	fl.IntVar(&o.MaxBatch, "max-batch", replaysvc.DefaultMaxBatch, "most records in one Push, Get, UpdatePriorities or Sample")
	return cmd
}
