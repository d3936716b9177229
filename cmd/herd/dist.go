package main

// Distributed runs (#13): `herd worker` joins a run's topology over NATS;
// `herd launch` starts an embedded NATS server and the worker processes,
// supervises them and writes the run directory.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"herd/algo"
	"herd/algo/all"
	"herd/internal/atomicfile"
	"herd/metrics"
	"herd/run/distexec"
	"herd/transport"
)

// natsFlags are the connection options of `herd worker` and `herd launch`.
// Secrets come from files or the environment, never from the command line
// or the logs: a URL with a user and password can be given as
// $HERD_NATS_URL, launch hands it to its workers that way, and it is only
// ever printed with its user information replaced (redactURL).
type natsFlags struct {
	url, creds, tlsCA, tlsCert, tlsKey string
	// replicas of the run's JetStream buckets (transport.NATS.SetReplicas).
	replicas int
}

// natsURLEnv names the environment variable that holds the NATS URL(s)
// when --nats is not given; it may carry credentials, as the command line
// should not.
const natsURLEnv = "HERD_NATS_URL"

func (f *natsFlags) add(cmd *cobra.Command, urlHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.url, "nats", "", urlHelp+"; or $"+natsURLEnv+" (where a URL with a password belongs: the command line is visible to every user of the machine)")
	fl.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + NKey seed)")
	fl.StringVar(&f.tlsCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fl.StringVar(&f.tlsCert, "nats-tls-cert", "", "client certificate file (mutual TLS)")
	fl.StringVar(&f.tlsKey, "nats-tls-key", "", "client key file (mutual TLS)")
	fl.IntVar(&f.replicas, "nats-replicas", 0, "replicas of the run's JetStream buckets (3 on a 3-node cluster survives one node lost; 0: server default)")
}

// jetstream wraps nc as a transport.NATS with the replicas asked for.
func (f *natsFlags) jetstream(nc *nats.Conn) (*transport.NATS, error) {
	n, err := transport.NewNATS(nc)
	if err != nil {
		return nil, err
	}
	n.SetReplicas(f.replicas)
	return n, nil
}

// args returns the flags to hand on to a worker process.
func (f *natsFlags) args() []string {
	var a []string
	for _, kv := range [][2]string{{"--nats-creds", f.creds}, {"--nats-tls-ca", f.tlsCA}, {"--nats-tls-cert", f.tlsCert}, {"--nats-tls-key", f.tlsKey}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	if f.replicas != 0 {
		a = append(a, "--nats-replicas", strconv.Itoa(f.replicas))
	}
	return a
}

// fromEnv takes the URL from $HERD_NATS_URL when --nats was not given.
func (f *natsFlags) fromEnv() {
	if f.url == "" {
		f.url = os.Getenv(natsURLEnv)
	}
}

// redactURL returns the comma-separated URLs in s with any user
// information (user, password or token) replaced by "***", for printing.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok {
			scheme, rest = "", p
		}
		host := rest
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			host = "***@" + rest[at+1:]
		}
		if ok {
			parts[i] = scheme + "://" + host
		} else {
			parts[i] = host
		}
	}
	return strings.Join(parts, ",")
}

// dial connects to the servers in f.url (comma-separated for a cluster).
func (f *natsFlags) dial(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.tlsCA != "" {
		opts = append(opts, nats.RootCAs(f.tlsCA))
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		opts = append(opts, nats.ClientCert(f.tlsCert, f.tlsKey))
	}
	nc, err := nats.Connect(f.url, opts...)
	if err != nil {
		// The URL may carry a user and password: do not repeat it.
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

// controllerName is the launcher's registration; workers exit when it is
// gone.
const controllerName = "controller"

type workerFlags struct {
	nats      natsFlags
	role, run string
	slot      int
	out       string
	quiet     bool
	// force, resume: the learner's run-directory mode, as herd train's.
	force, resume bool
	ttl           time.Duration
	wait          time.Duration
	metricsAddr   string // learner: Prometheus endpoint
}

func newWorkerCmd() *cobra.Command { return newWorkerCmdWith(all.Specs) }

func newWorkerCmdWith(specs func() []algo.Spec) *cobra.Command {
	var f workerFlags
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
			return runWorker(cmd.Context(), cmd.OutOrStdout(), specs(), &f, cmd.Flags().Changed("out"))
		},
	}
	f.nats.add(cmd, "NATS server URL(s), comma-separated (required)")
	fl := cmd.Flags()
	fl.StringVar(&f.role, "role", "", "env, policy or learner (required)")
	fl.StringVar(&f.run, "run", "", "run ID (required)")
	fl.IntVar(&f.slot, "slot", 0, "worker slot: env workers' randomness derives from (seed, slot)")
	fl.StringVar(&f.out, "out", "", "learner: run directory (default: the config's out)")
	fl.BoolVar(&f.quiet, "quiet", false, "learner: no progress output")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "learner: serve live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1)")
	fl.BoolVar(&f.force, "force", false, "learner: replace a run already in --out")
	fl.BoolVar(&f.resume, "resume", false, "learner: continue the run in --out from its checkpoint (no algorithm supports it yet: fails with the reason)")
	fl.DurationVar(&f.ttl, "ttl", 3*time.Second, "registration TTL (whole seconds)")
	fl.DurationVar(&f.wait, "wait", 60*time.Second, "how long to wait for the run's config")
	return cmd
}

func runWorker(ctx context.Context, w io.Writer, specs []algo.Spec, f *workerFlags, outSet bool) error {
	f.nats.fromEnv()
	switch {
	case f.role != "env" && f.role != "policy" && f.role != "learner":
		return fmt.Errorf("worker: --role must be env, policy or learner, got %q", f.role)
	case f.nats.url == "":
		return errors.New("worker: --nats (or $" + natsURLEnv + ") is required")
	case f.run == "":
		return errors.New("worker: --run is required")
	case f.slot < 0:
		return fmt.Errorf("worker: --slot must be ≥ 0, got %d", f.slot)
	}
	fc := flagCheck{cmd: "worker"}
	fc.durationAtLeast("ttl", time.Second, f.ttl)
	fc.durationAtLeast("wait", time.Millisecond, f.wait)
	if err := fc.err(); err != nil {
		return err
	}
	mode, err := dirMode(f.force, f.resume)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	name := f.role + "-" + strconv.Itoa(f.slot)
	// One connection per wire kind, so that the server's per-connection
	// counters are each kind's traffic (herd launch reports them).
	var byKind [transport.NumKinds]transport.Transport
	var n *transport.NATS
	for i, k := range transport.Kinds() {
		nc, err := f.nats.dial(transport.ConnName("herd "+name, k))
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer nc.Close()
		if n, err = f.nats.jetstream(nc); err != nil {
			return err
		}
		byKind[i] = n
	}
	// n, the last, is the membership connection: it also reads the config.
	tr := transport.SplitTransport(byKind[0], byKind[1], byKind[2], byKind[3])
	if err := n.Ready(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	// A worker started after its run ended (an orchestrator that restarts
	// whatever exits, a late replica) has nothing to do: it says so and
	// exits 0 instead of failing into a crash loop.
	if why, ended, err := n.RunEnded(ctx, f.run); err != nil {
		return fmt.Errorf("worker: %w", err)
	} else if ended {
		fmt.Fprintf(w, "worker %s: run %s has ended (%s); nothing to do\n", name, f.run, why)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, f.wait)
	data, err := n.RunConfig(wctx, f.run)
	cancel()
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	var ov algo.Overrides
	if outSet {
		ov.Out = &f.out
	}
	res, err := algo.Resolve(data, specs, ov)
	if err != nil {
		return fmt.Errorf("worker: run %s's config: %w", f.run, err)
	}
	if err := checkSlot(res, f.role, f.slot); err != nil {
		return fmt.Errorf("worker: run %s: %w", f.run, err)
	}

	mem, err := tr.Membership(ctx, f.run, transport.Options{TTL: f.ttl})
	if err != nil {
		return err
	}
	defer mem.Close()
	// The controller registers after storing the config: wait for it
	// (a worker may start first), or for the run's end mark.
	if ended, err := awaitController(ctx, n, mem, f.run, f.wait); err != nil {
		return fmt.Errorf("worker: %w", err)
	} else if ended != "" {
		fmt.Fprintf(w, "worker %s: run %s has ended (%s); nothing to do\n", name, f.run, ended)
		return nil
	}
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	gone, err := mem.Gone(ctx, controllerName)
	if err != nil {
		return err
	}
	errGone := errors.New("the run's controller is gone")
	go func() {
		select {
		case <-gone:
			cancelRun(errGone)
		case <-ctx.Done():
		}
	}()
	// The info is the process id, so an operator (or a fault test) can
	// find the process of a registration.
	lease, err := mem.Register(ctx, name, []byte(strconv.Itoa(os.Getpid())))
	if err != nil {
		if errors.Is(context.Cause(ctx), errGone) {
			fmt.Fprintf(w, "worker %s: %v; exiting\n", name, errGone)
			return nil
		}
		return err
	}
	defer lease.Close()

	flowPlan := res.Header.Runtime.Executor == "flow" // env workers serve the plan's actors
	var st *distexec.Setup
	if !flowPlan {
		if st, err = distexec.Prepare(res.Header, res.Spec, res.Config); err != nil {
			return err
		}
	}
	switch f.role {
	case "env":
		if flowPlan {
			err = serveFlowWorker(ctx, res, byKind[0], f.run, f.slot)
			break
		}
		err = st.RunEnvWorker(ctx, f.slot, tr, f.run)
	case "policy":
		err = st.RunPolicyWorker(ctx, f.slot, tr, f.run)
	case "learner":
		if flowPlan {
			res.Header.Runtime.Transport = "nats" // the driver's counters of its calls
		} else {
			res.Header.Runtime.Executor = "dist"
		}
		opt := algo.RunOptions{Dir: mode, Executors: map[string]algo.Executor{
			"dist": func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
				return distexec.Train(ctx, rt, spec, cfg, distexec.Options{LearnerOnly: true, Run: f.run,
					Dial: func() (transport.Transport, error) { return tr, nil }})
			},
			"flow": func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
				return trainFlowDriver(ctx, rt, spec, cfg, byKind[0], f.run)
			}}}
		if !f.quiet {
			opt.Progress, opt.Bar = w, isTerminal(w)
		}
		if f.metricsAddr != "" {
			opt.Live = metrics.NewLive()
			srv, serr := metrics.Serve(f.metricsAddr, opt.Live)
			if serr != nil {
				return fmt.Errorf("worker: %w", serr)
			}
			defer srv.Close()
			fmt.Fprintf(w, "metrics for Prometheus at http://%s/metrics\n", srv.Addr())
		}
		s, terr := algo.TrainRun(ctx, res, opt)
		err = terr
		if err == nil && !s.Interrupted {
			fmt.Fprintf(w, "done: %d steps in %.1f s (%.0f steps/s), %d episodes, return (last 100) %.2f ± %.2f\n",
				s.Steps, s.WallSeconds, s.SPS, s.Episodes, s.FinalReturnMean100, s.FinalReturnStd100)
		}
		switch {
		case len(s.Dist) > 0 && flowPlan:
			fmt.Fprintf(w, "flow: calls answered from a worker's memory %.0f, decode errors %.0f\n", s.Dist["dist/duplicates"], s.Dist["dist/decode_errors"])
		case len(s.Dist) > 0:
			fmt.Fprintln(w, distLine(s.Dist))
		}
		// Whatever the outcome, mark the run ended, so that workers that
		// start from now on exit at once.
		outcome := "completed"
		if err != nil {
			outcome = "the learner failed: " + err.Error()
		}
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if eerr := n.EndRun(ectx, f.run, outcome); eerr != nil {
			fmt.Fprintf(w, "worker %s: %v\n", name, eerr)
		}
		cancel()
	}
	ended := errors.Is(context.Cause(ctx), errGone)
	if f.role == "learner" {
		if ended && err != nil {
			// Nobody asked this run to stop: it is not finished, whatever
			// was saved. %v: not reported as a clean interruption.
			err = fmt.Errorf("worker %s: %v before the run finished: %v", name, errGone, err)
		}
		reportResult(mem, name, err)
		return err
	}
	switch {
	case ended:
		// The normal end of a run as an env or policy worker sees it.
		fmt.Fprintf(w, "worker %s: %v; exiting\n", name, errGone)
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("worker %s: %w", name, context.Cause(ctx)) // interrupted: nothing to save
	}
	return err
}

// distLine prints the dist executor's counters (summary.json's "dist").
func distLine(d map[string]float64) string {
	return fmt.Sprintf("dist: policy lag mean %.2f, max %.0f versions; dropped (lag) %.0f, duplicates %.0f, decode errors %.0f, stale weights %.0f, abandoned requests %.0f",
		d["dist/lag_mean"], d["dist/lag_max"], d["dist/dropped"], d["dist/duplicates"], d["dist/decode_errors"], d["dist/stale_weights"], d["dist/abandoned"])
}

// awaitController waits until the run's controller is registered, for at
// most wait, polling (the controller registers once, early). It returns
// the run's end mark instead when the run has ended.
func awaitController(ctx context.Context, n *transport.NATS, mem transport.Membership, run string, wait time.Duration) (string, error) {
	end := time.Now().Add(wait)
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			return "", err
		}
		if slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name == controllerName }) {
			return "", nil
		}
		why, ended, err := n.RunEnded(ctx, run)
		if err != nil {
			return "", err
		}
		if ended {
			return why, nil
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("run %s's controller did not register within %v", run, wait)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// checkSlot refuses a slot the run's topology does not have: env workers
// 0…env_workers-1, policy workers 0…policy_workers-1, learner 0.
func checkSlot(res *algo.Resolved, role string, slot int) error {
	rc := res.Header.Runtime
	n := 1
	switch role {
	case "env":
		n = max(rc.EnvWorkers, 1)
	case "policy":
		if rc.Executor == "flow" {
			return errors.New("a flow run has no policy workers")
		}
		st, err := distexec.Prepare(res.Header, res.Spec, res.Config)
		if err != nil {
			return err
		}
		n = st.PolicyWorkers(rc.PolicyWorkers)
	}
	if n == 0 {
		return fmt.Errorf("the run has no %s workers", role)
	}
	if slot >= n {
		return fmt.Errorf("--slot %d: the run has %d %s slot(s), 0…%d", slot, n, role, n-1)
	}
	return nil
}

// resultSuffix names the registration in which a learner leaves its exit
// status for a controller that does not own its process (herd launch
// --no-workers): "<status> <message>".
const resultSuffix = "-result"

// reportResult registers name+resultSuffix with err's exit status. The
// registration is left to expire after the TTL, long enough for the
// controller, which looks as soon as the learner's own registration is
// gone.
func reportResult(mem transport.Membership, name string, err error) {
	info := strconv.Itoa(exitCode(err))
	if err != nil {
		info += " " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = mem.Register(ctx, name+resultSuffix, []byte(info))
}

// ---- launch ----

type launchFlags struct {
	train         trainFlags
	nats          natsFlags
	run           string
	restarts      int
	restartWindow time.Duration
	ttl           time.Duration
	workerCommand []string // the command that runs `herd`; default this executable
	noWorkers     bool     // controller only: workers run elsewhere (Kubernetes, compose)
	metricsAddr   string   // the learner's Prometheus endpoint
}

func newLaunchCmd() *cobra.Command { return newLaunchCmdWith(all.Specs, nil) }

// newLaunchCmdWith builds `herd launch` over specs; self is the command line
// that runs herd in a worker process (nil: this executable).
func newLaunchCmdWith(specs func() []algo.Spec, self []string) *cobra.Command {
	var f launchFlags
	f.workerCommand = self
	cmd := &cobra.Command{
		Use:   "launch",
		Short: "run a distributed topology on this machine: embedded NATS plus worker processes",
		Long: `launch resolves the config as herd train does (same flags), starts an embedded
NATS server on 127.0.0.1 (or uses --nats), stores the config in the run, and
starts the worker processes: runtime.env_workers env workers, policy_workers
policy workers and one learner, each a 'herd worker' process. It restarts a
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
vanishes saves the run as interrupted and exits 1; a --no-workers
controller exits with its learner's status (0, 130 or 1), and 1 when the
learner vanished without one.`,
		Example: `  herd launch --config configs/ppo-cartpole-dist.yaml
  herd launch --config ppo.yaml --nats nats://nats-0.nats:4222 --run ppo-1 --no-workers
  herd launch --config configs/ppo-cartpole-dist.yaml --seed 2 --steps 100000 --quiet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc := flagCheck{cmd: "launch"}
			fc.durationAtLeast("ttl", time.Second, f.ttl)
			fc.atLeast("max-restarts", 0, int64(f.restarts))
			if err := fc.err(); err != nil {
				return err
			}
			res, err := resolveWith(cmd, &f.train, specs())
			if err != nil {
				return err
			}
			return runLaunch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), res, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.train.config, "config", "", "config file (YAML)")
	fl.Uint64Var(&f.train.seed, "seed", 1, "run seed")
	fl.Int64Var(&f.train.steps, "steps", 0, "total environment steps")
	fl.StringVar(&f.train.out, "out", "", "run directory (default runs/<algo>-<env>-<seed>)")
	fl.StringArrayVar(&f.train.set, "set", nil, "override an algorithm setting, key=value, or a runtime one, runtime.key=value (repeatable)")
	fl.BoolVar(&f.train.quiet, "quiet", false, "no progress output")
	fl.BoolVar(&f.train.force, "force", false, "replace a run already in --out")
	fl.BoolVar(&f.train.resume, "resume", false, "continue the run in --out from its checkpoint (no algorithm supports it yet: fails with the reason)")
	f.nats.add(cmd, "external NATS server URL(s) (default: an embedded server on 127.0.0.1)")
	fl.StringVar(&f.run, "run", "", "run ID (default herd-<seed>)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve the learner's live metrics for Prometheus at http://ADDR/metrics (a port alone binds 127.0.0.1)")
	fl.IntVar(&f.restarts, "max-restarts", 10, "restarts of one worker within --restart-window before the run fails")
	fl.DurationVar(&f.restartWindow, "restart-window", 10*time.Minute, "the window over which --max-restarts counts a worker's failures")
	fl.DurationVar(&f.ttl, "ttl", 3*time.Second, "registration TTL (whole seconds)")
	fl.BoolVar(&f.noWorkers, "no-workers", false, "controller only: store the config, register, and end when the learner (started elsewhere) has finished; needs --nats")
	return cmd
}

// restartBudget counts a worker's failures within a sliding window, so a
// long run survives rare crashes while a crash loop still ends it.
type restartBudget struct {
	max    int
	window time.Duration
	fails  []time.Time
}

// fail records a failure at now and returns the failures within the
// window and whether they exceed max restarts.
func (b *restartBudget) fail(now time.Time) (int, bool) {
	b.fails = append(slices.DeleteFunc(b.fails, func(t time.Time) bool { return now.Sub(t) > b.window }), now)
	return len(b.fails), len(b.fails) > b.max
}

// lockedWriter serializes writes from the worker processes' copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runLaunch(ctx context.Context, stdout, stderr io.Writer, res *algo.Resolved, f *launchFlags) error {
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	f.nats.fromEnv()
	h := res.Header
	rc := h.Runtime
	st, err := launchSetup(res)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	// The learner applies the mode when it opens the run directory; the
	// launcher checks it first so that a refused run starts no process.
	mode, err := dirMode(f.train.force, f.train.resume)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if mode == algo.DirNew && res.OutIsDefault() {
		// A default directory never collides (as in herd train).
		h.Out = algo.FreeRunDir(h.Out)
		res.Header.Out = h.Out
	}
	if err := checkRunDir(h.Out, mode); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if !f.noWorkers {
		if err := checkLocalWorkers(res, st); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	run := f.run
	if run == "" {
		run = "herd-" + strconv.FormatUint(h.Seed, 10)
	}
	url := f.nats.url
	if f.noWorkers && url == "" {
		return errors.New("launch: --no-workers needs --nats (the workers must reach the server)")
	}
	var srv *transport.Server // the embedded server, whose counters give the wire bytes
	if url == "" {
		if srv, err = transport.StartServer(transport.ServerOptions{}); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		defer srv.Shutdown()
		url = srv.URL()
		f.nats.url = url
	}
	nc, err := f.nats.dial(transport.ConnName("herd launch", transport.KindMembership)) // config and membership
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer nc.Close()
	n, err := f.nats.jetstream(nc)
	if err != nil {
		return err
	}
	res.Header.Runtime.Transport, res.Header.Runtime.NATSURL = "", "" // workers get --nats
	data, err := res.Marshal()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	// An external cluster may still be electing its JetStream meta leader;
	// then the buckets are made here, one at a time, so that the workers
	// bind to them instead of all creating the same replicated streams.
	if err := n.Ready(ctx); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if err := n.CreateBuckets(ctx, run, f.ttl); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if err := n.ResetRun(ctx, run); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if err := n.PutRunConfig(ctx, run, data); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	mem, err := n.Membership(ctx, run, transport.Options{TTL: f.ttl})
	if err != nil {
		return err
	}
	defer mem.Close()
	lease, err := mem.Register(ctx, controllerName, nil)
	if err != nil {
		return err
	}
	// Closing the lease removes the registration at once, which tells every
	// worker to exit; it runs before the children are reaped below.
	var closeLease sync.Once
	endRun := func() {
		closeLease.Do(func() {
			// The learner marks the run ended with its outcome; this mark
			// stays only where it could not (killed, or never started).
			ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = n.EndRun(ectx, run, "ended by the controller")
			cancel()
			_ = lease.Close()
		})
	}
	defer endRun()
	if f.noWorkers {
		fmt.Fprintf(stdout, "controller for run %s on %s: waiting for the learner\n", run, redactURL(url))
		return awaitLearner(ctx, mem)
	}

	self := f.workerCommand
	if self == nil {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		self = []string{exe}
	}
	// The URL reaches the workers through their environment, not their
	// command line, which every user of the machine can read.
	base := append([]string{"worker", "--run", run, "--ttl", f.ttl.String()}, f.nats.args()...)
	childEnv := append(os.Environ(), natsURLEnv+"="+url)
	envs := fmt.Sprintf(" × %d envs", st.NumEnvs)
	if rc.Executor == "flow" {
		envs = " serving the plan's actors"
	}
	fmt.Fprintf(stdout, "launching run %s: %s on %s%s, %s%s, %s, 1 learner → %s\n",
		run, h.Algo, h.Env, stepsNote(res), count(max(rc.EnvWorkers, 1), "env worker"), envs,
		count(st.PolicyWorkers(rc.PolicyWorkers), "policy worker"), h.Out)

	sctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	// learnerDone is closed once the learner process has exited (or could
	// not start); learnerExit is its exit status then (-1: killed by a
	// signal or never started). The other workers are stopped only after
	// it, so that a learner stopped by the launcher sees the launcher's
	// signal first and not its registration vanishing.
	learnerDone := make(chan struct{})
	learnerExit := -1
	supervise := func(name string, args []string, restart bool, out io.Writer) {
		wg.Go(func() {
			budget := restartBudget{max: f.restarts, window: f.restartWindow}
			if !restart {
				defer close(learnerDone)
			}
			for {
				cmd := exec.Command(self[0], append(append(append([]string(nil), self[1:]...), base...), args...)...)
				cmd.Env = childEnv
				// An env or policy worker stopped at the end of the run says
				// so on stderr; that is routine, so its stderr is muted once
				// the launcher stops it. The learner is stopped only when the
				// run fails or is interrupted, and what it says then counts.
				errOut := &muteWriter{w: stderr}
				cmd.Stdout, cmd.Stderr = out, errOut
				setChildAttrs(cmd)
				if err := cmd.Start(); err != nil {
					errs <- fmt.Errorf("launch: start %s: %w", name, err)
					stopAll()
					return
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				var err error
				select {
				case err = <-done:
				case <-sctx.Done():
					// Workers exit by themselves once the controller is gone,
					// but a worker whose watch sat on a NATS node that died
					// would only see it when its own keep-alive fails: this
					// launcher owns the process, so it asks directly (the
					// worker stops as on Ctrl-C), and kills stragglers.
					if restart {
						select {
						case <-learnerDone:
						case <-done:
						}
						endRun()
						errOut.mute()
					}
					_ = cmd.Process.Signal(syscall.SIGTERM)
					select {
					case <-done:
					case <-time.After(2*f.ttl + 5*time.Second):
						_ = cmd.Process.Kill()
						<-done
					}
					if !restart {
						learnerExit = cmd.ProcessState.ExitCode()
					}
					return
				}
				if !restart {
					learnerExit = cmd.ProcessState.ExitCode()
					if err != nil {
						errs <- fmt.Errorf("launch: %s: %w", name, err)
					}
					stopAll()
					return
				}
				if sctx.Err() != nil {
					return
				}
				n, over := budget.fail(time.Now())
				if over {
					errs <- fmt.Errorf("launch: %s failed %d times within %v, last: %v", name, n, f.restartWindow, err)
					stopAll()
					return
				}
				d := min(100*time.Millisecond<<min(n-1, 6), 5*time.Second)
				fmt.Fprintf(stderr, "launch: %s exited (%v); restarting in %v\n", name, err, d)
				select {
				case <-time.After(d):
				case <-sctx.Done():
					return
				}
			}
		})
	}
	for k := range st.PolicyWorkers(rc.PolicyWorkers) {
		supervise("policy worker "+strconv.Itoa(k), []string{"--role", "policy", "--slot", strconv.Itoa(k)}, true, io.Discard)
	}
	for k := range max(rc.EnvWorkers, 1) {
		supervise("env worker "+strconv.Itoa(k), []string{"--role", "env", "--slot", strconv.Itoa(k)}, true, io.Discard)
	}
	largs := []string{"--role", "learner", "--out", h.Out}
	if f.train.quiet {
		largs = append(largs, "--quiet")
	}
	if f.metricsAddr != "" {
		largs = append(largs, "--metrics-addr", f.metricsAddr)
	}
	switch mode {
	case algo.DirForce:
		largs = append(largs, "--force")
	case algo.DirResume:
		largs = append(largs, "--resume")
	}
	supervise("learner", largs, false, stdout)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	switch {
	case ctx.Err() == nil || learnerExit == exitOK:
	case learnerExit == exitInterrupted && len(all) == 0:
		// The learner saved the interrupted run (its exit status says so).
		return fmt.Errorf("launch: run %s interrupted; the learner saved its checkpoint and metrics in %s: %w", run, h.Out, context.Cause(ctx))
	default:
		all = append(all, fmt.Errorf("launch: run %s interrupted, and the learner did not save it (exit status %d)", run, learnerExit))
		// %v: a failure is never reported as a clean interruption.
		return fmt.Errorf("%v", errors.Join(all...))
	}
	if len(all) == 0 && srv != nil {
		// Every worker has exited, so its connections are closed and counted.
		if err := reportWire(stdout, srv, h.Out); err != nil {
			fmt.Fprintf(stderr, "launch: wire bytes not reported: %v\n", err)
		}
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, wroteLine(h.Out))
	}
	return errors.Join(all...)
}

// maxProcsPerCore bounds the worker processes launch starts on one machine:
// beyond it they only wait for each other's cores.
const maxProcsPerCore = 16

// checkLocalWorkers refuses, before any process starts, a topology this
// machine cannot hold: more worker processes than maxProcsPerCore per
// core, or more memory than it has (the run's estimate plus
// algo.ProcessBytes per process).
func checkLocalWorkers(res *algo.Resolved, st *distexec.Setup) error {
	rc := res.Header.Runtime
	envW, polW := max(rc.EnvWorkers, 1), st.PolicyWorkers(rc.PolicyWorkers)
	procs := envW + polW + 1
	if limit := maxProcsPerCore * runtime.NumCPU(); procs > limit {
		return fmt.Errorf("%w: runtime.env_workers %d + policy_workers %d + 1 learner = %d worker processes, more than %d per core on this machine's %d cores (%d); "+
			"run them on more machines with --no-workers", algo.ErrConfig, envW, polW, procs, maxProcsPerCore, runtime.NumCPU(), limit)
	}
	return algo.CheckMemory(res, algo.MemoryUse{Key: fmt.Sprintf("env_workers+policy_workers+1=%d", procs),
		What: "worker processes", Bytes: float64(procs) * algo.ProcessBytes})
}

// reportWire adds the run's wire bytes per env step, total and by kind, to
// the learner's summary.json in dir and prints them. They are what crossed
// the embedded server's client connections (transport.ConnTraffic: payloads and
// headers, both directions), so every message between two processes counts
// twice — once into the server, once out.
func reportWire(w io.Writer, srv *transport.Server, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conns, err := srv.SettledTraffic(ctx, 1) // the launcher's own connection stays open
	if err != nil {
		return err
	}
	path := filepath.Join(dir, algo.SummaryFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s struct {
		Steps int64 `json:"steps"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if s.Steps <= 0 {
		return fmt.Errorf("%s: no env steps", path)
	}
	ws := transport.SumTraffic(conns)
	perStep := func(n uint64) float64 { return math.Round(float64(n)/float64(s.Steps)*10) / 10 }
	type kindJSON struct {
		Bytes        uint64  `json:"bytes"`
		BytesPerStep float64 `json:"bytes_per_env_step"`
	}
	add := struct {
		Bytes        uint64              `json:"wire_bytes"`
		BytesPerStep float64             `json:"wire_bytes_per_env_step"`
		ByKind       map[string]kindJSON `json:"wire_by_kind"`
	}{Bytes: ws.Total, BytesPerStep: perStep(ws.Total), ByKind: map[string]kindJSON{}}
	line := fmt.Sprintf("wire: %.1f B/env step", add.BytesPerStep)
	for _, k := range transport.Kinds() {
		kj := kindJSON{ws.ByKind[k], perStep(ws.ByKind[k])}
		add.ByKind[wireLabel(k)] = kj
		line += fmt.Sprintf(", %s %.1f", wireLabel(k), kj.BytesPerStep)
	}
	if ws.Other > 0 {
		add.ByKind["other"] = kindJSON{ws.Other, perStep(ws.Other)}
		line += fmt.Sprintf(", other %.1f", perStep(ws.Other))
	}
	out, err := mergeJSON(b, add)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%d B over %d env steps; payload + headers, in and out of the server)\n", line, ws.Total, s.Steps)
	return nil
}

// wireLabel is the name a wire kind has in herd's output: the parameter
// stream carries the policy's weights, and users read "weights".
func wireLabel(kind string) string {
	if kind == transport.KindParams {
		return "weights"
	}
	return kind
}

// mergeJSON appends add's fields to the JSON object obj, keeping obj's
// fields and their order as written.
func mergeJSON(obj []byte, add any) ([]byte, error) {
	a, err := json.MarshalIndent(add, "", "  ")
	if err != nil {
		return nil, err
	}
	o, x := bytes.TrimRight(obj, " \t\r\n"), bytes.TrimSpace(a)
	if !bytes.HasSuffix(o, []byte("}")) || len(x) < 2 {
		return nil, errors.New("not a JSON object")
	}
	o, x = bytes.TrimRight(o[:len(o)-1], " \t\r\n"), bytes.TrimSpace(x[1:len(x)-1])
	var m []byte
	m = append(m, o...)
	if !bytes.HasSuffix(o, []byte("{")) {
		m = append(m, ',')
	}
	m = append(m, "\n  "...)
	m = append(m, x...)
	m = append(m, "\n}\n"...)
	if !json.Valid(m) {
		return nil, errors.New("merged summary is not valid JSON")
	}
	return m, nil
}

// muteWriter passes writes to w until mute is called, then drops them.
// exec's copying goroutine writes while the launcher mutes.
type muteWriter struct {
	w     io.Writer
	muted atomic.Bool
}

func (m *muteWriter) Write(p []byte) (int, error) {
	if m.muted.Load() {
		return len(p), nil
	}
	return m.w.Write(p)
}

func (m *muteWriter) mute() { m.muted.Store(true) }

// dirMode maps --force and --resume to the run-directory mode.
func dirMode(force, resume bool) (algo.DirMode, error) {
	switch {
	case force && resume:
		return 0, errors.New("--force and --resume exclude each other")
	case force:
		return algo.DirForce, nil
	case resume:
		return algo.DirResume, nil
	}
	return algo.DirNew, nil
}

// checkRunDir refuses, before any worker starts, what the learner's
// algo.TrainRun would refuse for dir in mode: a run already there without
// --force, and --resume (no algorithm can resume today). It neither
// creates nor locks dir; the learner does that.
func checkRunDir(dir string, mode algo.DirMode) error {
	var existing []string
	for _, f := range algo.RunFiles() {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			existing = append(existing, f)
		}
	}
	switch {
	case mode == algo.DirResume && len(existing) == 0:
		return fmt.Errorf("%w %s: it holds no run", algo.ErrCannotResume, dir)
	case mode == algo.DirResume:
		return fmt.Errorf("%w %s: herd checkpoints hold the weights only, so no algorithm can continue a run where it stopped; "+
			"use --force to train it again from scratch, or another --out", algo.ErrCannotResume, dir)
	case mode == algo.DirNew && len(existing) > 0:
		return fmt.Errorf("%w: %s holds %v; use --force to replace it or another --out", algo.ErrRunExists, dir, existing)
	}
	return nil
}

// awaitLearner returns when the learner has registered and then gone, with
// the learner's result: nil for a completed run, an error wrapping
// context.Canceled for a run interrupted and saved, any other error for a
// learner that failed or vanished without a result (killed, its node
// lost). When ctx ends first it returns ctx's cause. Polling once a second
// is cheap next to a training run and avoids racing the first
// registration.
func awaitLearner(ctx context.Context, mem transport.Membership) error {
	const learner = "learner-0"
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ms, err := mem.Members(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("launch: %w", err)
		}
		if slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name == learner }) {
			break
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("launch: stopped while waiting for the learner: %w", context.Cause(ctx))
		}
	}
	gone, err := mem.Gone(ctx, learner)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	select {
	case <-gone:
	case <-ctx.Done():
		return fmt.Errorf("launch: stopped while the learner runs (it goes on until the run's registration expires): %w", context.Cause(ctx))
	}
	ms, err := mem.Members(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("launch: the learner is gone and its result unreadable: %w", err)
	}
	i := slices.IndexFunc(ms, func(m transport.Member) bool { return m.Name == learner+resultSuffix })
	if i < 0 {
		return errors.New("launch: the learner is gone without a result (killed, or its machine lost): the run is not finished")
	}
	code, msg, _ := strings.Cut(string(ms[i].Info), " ")
	switch code {
	case strconv.Itoa(exitOK):
		return nil
	case strconv.Itoa(exitInterrupted):
		return fmt.Errorf("launch: the learner was interrupted (%s): %w", msg, context.Canceled)
	}
	return fmt.Errorf("launch: the learner failed (exit status %s): %s", code, msg)
}
