package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"herd/algo"
	"herd/env"
	"herd/flow"
	"herd/metrics/prom"
	"herd/run"
	"herd/run/distexec"
	"herd/transport"
)

// ControllerName is the launcher's registration in a run; workers exit
// when it is gone.
const ControllerName = "controller"

// WorkerOptions are a worker process's settings (`herd worker`).
type WorkerOptions struct {
	NATS NATS
	// Role is env, policy or learner; Slot the worker's index in its role.
	Role string
	Slot int
	// SlotOffset is added to Slot: a Kubernetes Indexed Job numbers its
	// pods from 0, and the learners after the first are slots 1…M−1.
	SlotOffset int
	// Run is the run ID the launcher stored the config under.
	Run string
	// Specs are the algorithms the worker knows.
	Specs []algo.Spec
	// Envs makes the run's envs (algo.Header.Envs).
	Envs env.Maker
	// Out, when OutSet, overrides the config's run directory (learner).
	Out    string
	OutSet bool
	// Quiet: no progress output (learner).
	Quiet bool
	// Force, Resume: the learner's run-directory mode, as herd train's.
	Force, Resume bool
	// TTL of the worker's registration (whole seconds, ≥ 1s).
	TTL time.Duration
	// Wait bounds the wait for the run's config and controller.
	Wait time.Duration
	// Stall is a learner's progress watchdog (distexec.Options.Stall; 0:
	// its 60 s default): where an orchestrator may start the env workers
	// minutes after the learner, it must outlast their start.
	Stall time.Duration
	// MetricsAddr, when set, serves the worker's live metrics for
	// Prometheus.
	MetricsAddr string
	// CPUProfile, when set, is the file of a CPU profile (pprof) of this
	// worker; an env or policy worker also writes its time by phase to
	// CPUProfile + ".steps.json".
	CPUProfile string
	// Stdout receives progress and the worker's notes.
	Stdout io.Writer
}

// RunWorker joins the run o.Run in o.Role and works until the run's
// controller is gone (a normal end for env and policy workers), ctx ends
// (interrupted: the learner saves the run), or it fails. A worker started
// after its run ended has nothing to do and returns nil.
func RunWorker(ctx context.Context, o WorkerOptions) (err error) {
	w := o.Stdout
	if w == nil {
		w = io.Discard
	}
	o.NATS.FromEnv()
	if o.SlotOffset < 0 {
		return fmt.Errorf("worker: --slot-offset must be ≥ 0, got %d", o.SlotOffset)
	}
	o.Slot += o.SlotOffset
	switch {
	case o.Role != "env" && o.Role != "policy" && o.Role != "learner":
		return fmt.Errorf("worker: --role must be env, policy or learner, got %q", o.Role)
	case o.NATS.URL == "":
		return errors.New("worker: --nats (or $" + URLEnv + ") is required")
	case o.Run == "":
		return errors.New("worker: --run is required")
	case o.Slot < 0:
		return fmt.Errorf("worker: --slot must be ≥ 0, got %d", o.Slot)
	case o.TTL < time.Second:
		return fmt.Errorf("worker: --ttl: must be >= %v, got %v", time.Second, o.TTL)
	case o.Wait < time.Millisecond:
		return fmt.Errorf("worker: --wait: must be >= %v, got %v", time.Millisecond, o.Wait)
	case o.Stall < 0:
		return fmt.Errorf("worker: --stall: must be > 0 (or 0 for the default), got %v", o.Stall)
	}
	mode, err := run.DirMode(o.Force, o.Resume)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	stopProfile, err := run.StartCPUProfile(o.CPUProfile)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer func() {
		if perr := stopProfile(); perr != nil {
			// %v: an interrupted worker whose profile was lost failed.
			err = fmt.Errorf("worker: %v", errors.Join(err, perr))
		}
	}()
	name := o.Role + "-" + strconv.Itoa(o.Slot)
	// One connection per wire kind, so that the server's per-connection
	// counters are each kind's traffic (herd launch reports them).
	var byKind [transport.NumKinds]transport.Transport
	var n *transport.NATS
	for i, k := range transport.Kinds() {
		var closeConn func()
		if n, closeConn, err = o.NATS.jetstream(transport.ConnName("herd "+name, k)); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer closeConn()
		byKind[i] = n
	}
	// n, the last, is the membership connection: it also reads the config.
	tr := transport.SplitTransport(byKind[0], byKind[1], byKind[2], byKind[3])
	if err := n.Ready(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	lead := o.Role == "learner" && o.Slot == 0
	marked := false // the run's end mark written by this learner
	if lead {
		// A learner that fails before it trains (a config it cannot use,
		// a restart it cannot continue) marks the run ended with the
		// reason as well: its controller reads it there and fails at
		// once, instead of waiting for a learner that never comes.
		defer func() {
			if err == nil || marked {
				return
			}
			ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if eerr := n.EndRun(ectx, o.Run, endMark(err)); eerr != nil {
				fmt.Fprintf(w, "worker %s: %v\n", name, eerr)
			}
			cancel()
		}()
	}
	// A worker started after its run ended (an orchestrator that restarts
	// whatever exits, a late replica) has nothing to do: it says so and
	// exits 0 instead of failing into a crash loop.
	if why, ended, err := n.RunEnded(ctx, o.Run); err != nil {
		return fmt.Errorf("worker: %w", err)
	} else if ended {
		fmt.Fprintf(w, "worker %s: run %s has ended (%s); nothing to do\n", name, o.Run, describeEnd(why))
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.Wait)
	data, err := n.RunConfig(wctx, o.Run)
	cancel()
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	ov := algo.Overrides{Envs: o.Envs}
	if o.OutSet {
		ov.Out = &o.Out
	}
	res, err := algo.Resolve(data, o.Specs, ov)
	if err != nil {
		return fmt.Errorf("worker: run %s's config: %w", o.Run, err)
	}
	if err := checkSlot(res, o.Role, o.Slot); err != nil {
		return fmt.Errorf("worker: run %s: %w", o.Run, err)
	}

	mem, err := tr.Membership(ctx, o.Run, transport.Options{TTL: o.TTL})
	if err != nil {
		return err
	}
	defer mem.Close()
	// The controller registers after storing the config: wait for it
	// (a worker may start first), or for the run's end mark.
	if ended, err := awaitController(ctx, n, mem, o.Run, o.Wait); err != nil {
		return fmt.Errorf("worker: %w", err)
	} else if ended != "" {
		fmt.Fprintf(w, "worker %s: run %s has ended (%s); nothing to do\n", name, o.Run, describeEnd(ended))
		return nil
	}
	if lead {
		again, err := restarted(ctx, mem, name)
		if err != nil {
			return err
		}
		if again > 1 {
			// The learner before this one ended without marking the run
			// (killed, or its machine lost): continue from its newest
			// checkpoint, whatever mode the first start had.
			fmt.Fprintf(w, "worker %s: start %d of run %s: the learner before it ended without a result; resuming from %s\n",
				name, again, o.Run, res.Header.Out)
			mode = algo.DirResume
		}
	}
	ctx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	gone, err := mem.Gone(ctx, ControllerName)
	if err != nil {
		return err
	}
	errGone := errors.New("the run's controller is gone")
	go func() {
		select {
		case <-gone:
			// A controller interrupted by its operator asks the run to stop
			// before it goes: an interruption, saved as such.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			why, stopped, _ := n.RunStopped(sctx, o.Run)
			cancel()
			if stopped {
				cancelRun(fmt.Errorf("the run's controller stopped it (%s): %w", why, context.Canceled))
				return
			}
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

	isFlow := flowPlan(res.Header.Runtime) // env workers serve the plan's actors
	var st *distexec.Setup
	if !isFlow {
		if st, err = distexec.PrepareRun(res); err != nil {
			return err
		}
	}
	if o.CPUProfile != "" && st != nil {
		defer writeTiming(o.CPUProfile+".steps.json", timeRoles(st))
	}
	// Learner 0 serves its live metrics from the run (runLearner); the
	// other roles, learner peers included, their process's registry.
	if o.MetricsAddr != "" && (o.Role != "learner" || o.Slot > 0) && st != nil {
		reg := prom.NewRegistry()
		srv, serr := prom.ServeRegistry(o.MetricsAddr, reg)
		if serr != nil {
			return fmt.Errorf("worker: %w", serr)
		}
		defer srv.Close()
		st.Metrics = reg
		fmt.Fprintf(w, "worker %s: metrics for Prometheus at http://%s/metrics\n", name, srv.Addr())
	}
	switch o.Role {
	case "env":
		if isFlow {
			err = serveFlowWorker(ctx, res, byKind[0], o.Run, o.Slot)
			break
		}
		err = st.RunEnvWorker(ctx, o.Slot, tr, o.Run)
	case "policy":
		err = st.RunPolicyWorker(ctx, o.Slot, tr, o.Run)
	case "learner":
		if o.Slot > 0 {
			// A data-parallel learner after the first: it ends with its
			// updates; learner 0 writes the run and marks its end.
			// Its registration stays until the run ends (the controller
			// is gone), as an env worker's: learner 0 takes a learner that
			// is gone before then for a dead one.
			if err = st.RunLearnerPeer(ctx, o.Slot, tr, o.Run, distexec.Options{Stall: o.Stall}); err == nil {
				fmt.Fprintf(w, "worker %s: updates done; waiting for the run's end\n", name)
				<-ctx.Done()
			}
			break
		}
		err = runLearner(ctx, w, tr, byKind[0], mem, res, mode, o)
	}
	ended := errors.Is(context.Cause(ctx), errGone)
	if lead {
		if ended && err != nil {
			// Nobody asked this run to stop: it is not finished, whatever
			// was saved. %v: not reported as a clean interruption.
			err = fmt.Errorf("worker %s: %v before the run finished: %v", name, errGone, err)
		}
		// Whatever the outcome, mark the run ended with it (before the
		// registration goes): the controller reads it there, and workers
		// that start from now on exit at once.
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if eerr := n.EndRun(ectx, o.Run, endMark(err)); eerr != nil {
			fmt.Fprintf(w, "worker %s: %v\n", name, eerr)
		}
		cancel()
		marked = true
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

// restarted returns which start of the run's learner this is (1: the
// first). A later one follows a learner that ended without marking the
// run (killed, or its machine lost; a learner that fails marks it, and a
// worker started after the mark exits at once), and continues the run
// from its checkpoints; a run that cannot resume fails there, naming why
// (algo.ErrCannotResume).
func restarted(ctx context.Context, mem transport.Membership, name string) (uint64, error) {
	p, err := mem.Resume(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("worker %s: %w", name, err)
	}
	return p.Incarnation, nil
}

// runLearner trains the run as its learner through algo.TrainRun with the
// dist executor in learner-only mode, then marks the run ended.
func runLearner(ctx context.Context, w io.Writer, tr, calls transport.Transport, mem transport.Membership, res *algo.Resolved, mode algo.DirMode, o WorkerOptions) error {
	isFlow := flowPlan(res.Header.Runtime)
	if isFlow {
		res.Header.Runtime.Transport = "nats" // the driver's counters of its calls
	} else {
		res.Header.Runtime.Executor = "dist"
	}
	dist, fl := distexec.Executor(), flow.Executor()
	dist.Train = func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
		return distexec.Train(ctx, rt, spec, cfg, distexec.Options{LearnerOnly: true, Run: o.Run, Notice: w, Stall: o.Stall,
			Dial: func() (transport.Transport, error) { return tr, nil }, Watch: watchLearners(mem, rt.Header.Runtime.Learners)})
	}
	fl.Train = func(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config) (algo.Model, error) {
		return trainFlowDriver(ctx, rt, spec, cfg, calls, o.Run, mem)
	}
	opt := algo.RunOptions{Dir: mode, Executors: []algo.Executor{dist, fl}, Resumed: run.ResumedNote(w)}
	if !o.Quiet {
		opt.Progress, opt.Bar = w, run.IsTerminal(w)
	}
	if o.MetricsAddr != "" {
		live, srv, err := run.ServeLive(w, o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer srv.Close()
		opt.Live = live
	}
	s, err := algo.TrainRun(ctx, res, opt)
	if err == nil && !s.Interrupted {
		fmt.Fprintln(w, run.DoneLine(s))
	}
	switch {
	case len(s.Dist) > 0 && isFlow:
		fmt.Fprintf(w, "flow: calls answered from a worker's memory %.0f, decode errors %.0f, workers rejoined after a restart %.0f, calls reissued %.0f\n",
			s.Dist["dist/duplicates"], s.Dist["dist/decode_errors"], s.Dist["dist/restarts"], s.Dist["dist/reissued"])
	case len(s.Dist) > 0:
		fmt.Fprintln(w, distLine(s.Dist))
	}
	return err
}

// watchLearners returns distexec.Options.Watch for learner 0 of m: an
// error as soon as another learner's registration, once seen, is gone (its process
// ended, or it stopped answering for a TTL), so that a dead learner ends
// the run at once rather than at the all-gather's deadline.
func watchLearners(mem transport.Membership, m int) func(ctx context.Context) <-chan error {
	if m < 2 {
		return nil
	}
	return func(ctx context.Context) <-chan error {
		out := make(chan error, m)
		for j := 1; j < m; j++ {
			name := distexec.LearnerName(j)
			go func() {
				// Watch from its registration on (polled: it registers
				// once, early); one that never registers is caught by the
				// all-gather's deadline.
				for {
					ms, err := mem.Members(ctx)
					if err == nil && slices.ContainsFunc(ms, func(x transport.Member) bool { return x.Name == name }) {
						break
					}
					select {
					case <-time.After(250 * time.Millisecond):
					case <-ctx.Done():
						return
					}
				}
				gone, err := mem.Gone(ctx, name)
				if err != nil {
					out <- fmt.Errorf("worker: watch %s: %w", name, err)
					return
				}
				select {
				case <-gone:
					out <- fmt.Errorf("worker: %s is gone (its process ended or stopped answering): the learners share every update, so the run cannot go on", name)
				case <-ctx.Done():
				}
			}()
		}
		return out
	}
}

// distLine prints the dist executor's counters (summary.json's "dist").
func distLine(d map[string]float64) string {
	return fmt.Sprintf("dist: policy lag mean %.2f, max %.0f versions; dropped (lag) %.0f, duplicates %.0f, discarded %.0f, shed %.0f, decode errors %.0f, stale weights %.0f, abandoned requests %.0f; workers gone silent %.0f (silent at the end %.0f)",
		d["dist/lag_mean"], d["dist/lag_max"], d["dist/dropped"], d["dist/duplicates"], d["dist/discarded"], d["dist/shed"], d["dist/decode_errors"], d["dist/stale_weights"], d["dist/abandoned"],
		d["dist/silences"], d["dist/silent_workers"])
}

// awaitController waits until the run's controller is registered, for at
// most wait, polling (the controller registers once, early). It returns
// the run's end mark instead when the run has ended.
func awaitController(ctx context.Context, n *transport.NATS, mem transport.Membership, runID string, wait time.Duration) (string, error) {
	end := time.Now().Add(wait)
	for {
		ms, err := mem.Members(ctx)
		if err != nil {
			return "", err
		}
		if slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name == ControllerName }) {
			return "", nil
		}
		why, ended, err := n.RunEnded(ctx, runID)
		if err != nil {
			return "", err
		}
		if ended {
			return why, nil
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("run %s's controller did not register within %v", runID, wait)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// checkSlot refuses a slot the run's topology does not have: env workers
// 0…env_workers-1, policy workers 0…policy_workers-1, learners
// 0…learners-1.
func checkSlot(res *algo.Resolved, role string, slot int) error {
	rc := res.Header.Runtime
	n := 1
	switch role {
	case "learner":
		n = max(rc.Learners, 1)
	case "env":
		n = max(rc.EnvWorkers, 1)
	case "policy":
		if flowPlan(rc) {
			return errors.New("a flow run has no policy workers")
		}
		st, err := distexec.PrepareRun(res)
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
