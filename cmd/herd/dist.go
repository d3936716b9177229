package main

// Distributed runs: `herd worker` joins a run's topology over NATS;
// `herd launch` starts an embedded NATS server and the worker processes,
// supervises them and writes the run directory (logic in herd/launch).

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"herd/algo"
	"herd/algo/all"
	"herd/launch"
	"herd/run/distexec"
)

// addNATSFlags binds the connection flags of `herd worker` and `herd
// launch` to o.
func addNATSFlags(cmd *cobra.Command, o *launch.NATS, urlHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&o.URL, "nats", "", urlHelp+"; or $"+launch.URLEnv+" (where a URL with a password belongs: the command line is visible to every user of the machine)")
	fl.StringVar(&o.Creds, "nats-creds", "", "NATS credentials file (JWT + NKey seed)")
	fl.StringVar(&o.TLSCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fl.StringVar(&o.TLSCert, "nats-tls-cert", "", "client certificate file (mutual TLS)")
	fl.StringVar(&o.TLSKey, "nats-tls-key", "", "client key file (mutual TLS)")
	fl.IntVar(&o.Replicas, "nats-replicas", 0, "replicas of the run's JetStream buckets (3 on a 3-node cluster survives one node lost; 0: server default)")
}

func newWorkerCmd() *cobra.Command { return newWorkerCmdWith(all.Specs) }

func newWorkerCmdWith(specs func() []algo.Spec) *cobra.Command {
	var o launch.WorkerOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "join a distributed run as an env worker, policy worker or learner",
		Long: `worker joins the run --run on the NATS servers --nats (comma-separated for a
cluster) in one role. It reads the run's config from the run (stored by
herd launch), registers itself with a keep-alive, and exits by itself when
the run's controller is gone. The learner writes the run directory (--out,
default the config's out).`,
		Example: `  herd worker --role env --slot 0 --nats nats://10.0.0.5:4222 --run ppo-1
  herd worker --role policy --nats nats://a:4222,nats://b:4222 --run ppo-1 --nats-creds run.creds`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A launcher's worker writes to the launcher's pipes: when the
			// launcher is killed, a write must fail, not kill a learner
			// that is saving the run.
			signal.Ignore(syscall.SIGPIPE)
			ctx, stop := hangupContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			o.Specs, o.Envs, o.OutSet, o.Stdout = specs(), envMaker(), cmd.Flags().Changed("out"), cmd.OutOrStdout()
			return launch.RunWorker(ctx, o)
		},
	}
	addNATSFlags(cmd, &o.NATS, "NATS server URL(s), comma-separated (required)")
	fl := cmd.Flags()
	fl.StringVar(&o.Role, "role", "", "env, policy or learner (required)")
	fl.StringVar(&o.Run, "run", "", "run ID (required)")
	fl.IntVar(&o.Slot, "slot", 0, "worker slot: env workers' randomness derives from (seed, slot)")
	fl.IntVar(&o.SlotOffset, "slot-offset", 0, "added to --slot (a Kubernetes Indexed Job's pods count from 0; the learners after the first are slots 1…M−1)")
	fl.StringVar(&o.Out, "out", "", "learner: run directory (default: the config's out)")
	fl.BoolVar(&o.Quiet, "quiet", false, "learner: no progress output")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve the worker's live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1)")
	fl.BoolVar(&o.Force, "force", false, "learner: replace a run already in --out")
	fl.BoolVar(&o.Resume, "resume", false, "learner: continue the run in --out from its checkpoint (no algorithm supports it yet: fails with the reason)")
	fl.DurationVar(&o.TTL, "ttl", 3*time.Second, "registration TTL (whole seconds)")
	fl.DurationVar(&o.Wait, "wait", 60*time.Second, "how long to wait for the run's config")
	fl.DurationVar(&o.Stall, "stall", distexec.DefaultStall, "learner: end the run when no sample comes for this long (where workers may start minutes after the learner, e.g. pods being scheduled, raise it)")
	fl.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile (pprof) of this worker to this file")
	return cmd
}

func newLaunchCmd() *cobra.Command { return newLaunchCmdWith(all.Specs, nil) }

// newLaunchCmdWith builds `herd launch` over specs; self is the command line
// that runs herd in a worker process (nil: this executable).
func newLaunchCmdWith(specs func() []algo.Spec, self []string) *cobra.Command {
	var f trainFlags
	o := launch.Options{WorkerCommand: self}
	cmd := &cobra.Command{
		Use:   "launch",
		Short: "run a distributed topology on this machine: embedded NATS plus worker processes",
		Long: `launch resolves the config as herd train does (same flags), starts an embedded
NATS server on 127.0.0.1 (or uses --nats), stores the config in the run, and
starts the worker processes: runtime.env_workers env workers, policy_workers
policy workers (none under runtime.inference inline and for off-policy
algorithms) and one learner, each a 'herd worker' process. It restarts a
crashed env or policy worker with back-off, ends when the learner has
finished, and leaves no process behind (workers exit by themselves when the
launcher's registration is gone, and are killed if they linger). The
learner writes the run directory; with the embedded server the launcher adds
the wire bytes per env step, by kind, to its summary.json. With --no-workers (and --nats) it is the
controller only, for workers run elsewhere (deploy/: compose, Kubernetes).
With runtime.executor flow (a dataflow plan, runtime.env_workers written
out) the env workers serve the plan's actors and the learner drives the
plan; there are no policy workers.

Ctrl-C or SIGTERM stops the learner first (it saves the interrupted run),
then the other workers; launch exits 130 when the learner saved the run and
1 when it did not. Workers run in process groups of their own, so a
terminal's Ctrl-C reaches only the launcher. A learner whose controller
vanishes saves the run as interrupted and exits 1; when launch itself is
killed (kill -9), its learner gets SIGHUP and saves the run as interrupted
(Linux; the other workers die with launch). A --no-workers
controller exits with its learner's status (0, 130 or 1), and 1 when the
learner vanished without one, failed before it registered, or did not
register within --register-timeout; on Ctrl-C it asks the learner to stop
and exits 130 only when the learner says it saved the run. A learner
killed by a signal is started again and resumes the run from its newest
checkpoint (one learner: PPO, A2C, and DQN, SAC, TD3, DDPG under Ape-X;
docs/guide/resume.md); a --no-workers controller
waits up to --register-timeout for its orchestrator to restart it.`,
		Example: `  herd launch --config configs/ppo-cartpole-dist.yaml
  herd launch --config ppo.yaml --nats nats://nats-0.nats:4222 --run ppo-1 --no-workers
  herd launch --config configs/ppo-cartpole-dist.yaml --seed 2 --steps 100000 --quiet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := resolveWith(cmd, &f, specs())
			if err != nil {
				return err
			}
			o.Resolved, o.Quiet, o.Force, o.Resume = res, f.quiet, f.force, f.resume
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return launch.Run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "config file (YAML)")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed")
	fl.Int64Var(&f.steps, "steps", 0, "total environment steps")
	fl.StringVar(&f.out, "out", "", "run directory (default runs/<algo>-<env>-<seed>)")
	fl.StringArrayVar(&f.set, "set", nil, "override an algorithm setting, key=value, or a runtime one, runtime.key=value (repeatable)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.BoolVar(&f.force, "force", false, "replace a run already in --out")
	fl.BoolVar(&f.resume, "resume", false, "continue the run in --out from its checkpoint (no algorithm supports it yet: fails with the reason)")
	addNATSFlags(cmd, &o.NATS, "external NATS server URL(s) (default: an embedded server on 127.0.0.1)")
	fl.StringVar(&o.Run, "run", "", "run ID (default herd-<seed>)")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve live metrics for Prometheus at http://ADDR/metrics: the learner at ADDR, policy then env workers at the next ports (a port alone binds 127.0.0.1)")
	fl.IntVar(&o.Restarts, "max-restarts", 10, "restarts of one worker within --restart-window before the run fails")
	fl.DurationVar(&o.RestartWindow, "restart-window", 10*time.Minute, "the window over which --max-restarts counts a worker's failures")
	fl.DurationVar(&o.TTL, "ttl", 3*time.Second, "registration TTL (whole seconds)")
	fl.StringVar(&o.CPUProfiles, "cpuprofile", "", "write CPU profiles (pprof) of the launcher (embedded NATS server included) and each worker into this folder")
	fl.DurationVar(&o.RegisterTimeout, "register-timeout", 10*time.Minute, "--no-workers: fail when no learner has registered (or marked the run ended) within this")
	fl.BoolVar(&o.NoWorkers, "no-workers", false, "controller only: store the config, register, and end when the learner (started elsewhere) has finished; needs --nats")
	return cmd
}

// hangupContext returns ctx cancelled by the first SIGHUP, which a
// launcher's learner gets when the launcher dies (its parent-death signal,
// once per thread of the launcher): the worker stops as on Ctrl-C, so a
// learner saves the run, and the repeats never escalate into an exit that
// saves nothing.
func hangupContext(ctx context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 4)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case <-hup:
			fmt.Fprintln(stderr, "herd: hang-up (the launcher is gone): stopping (saving what must be saved)")
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(hup)
		close(done)
		cancel()
	}
}
