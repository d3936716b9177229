package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"herd/algo"
	"herd/metrics/prom"
	"herd/run"
	"herd/run/distexec"
	"herd/transport"
)

// Options are a launcher's settings (`herd launch`).
type Options struct {
	// Resolved is the run's config; its runtime.executor must be dist.
	Resolved *algo.Resolved
	// NATS: an external server (NATS.URL) or, when URL is empty, an
	// embedded one on 127.0.0.1; the other fields reach the workers.
	NATS NATS
	// Run is the run ID (default herd-<seed>).
	Run string
	// Restarts bounds the restarts of one worker within RestartWindow
	// before the run fails.
	Restarts      int
	RestartWindow time.Duration
	// TTL of the registrations (whole seconds, ≥ 1s).
	TTL time.Duration
	// WorkerCommand is the command line that runs herd in a worker
	// process (nil: this executable); "worker" and its flags follow it.
	WorkerCommand []string
	// NoWorkers: controller only, the workers run elsewhere (needs
	// NATS.URL).
	NoWorkers bool
	// RegisterTimeout bounds a --no-workers controller's wait for its
	// learner to register (or to mark the run ended).
	RegisterTimeout time.Duration
	// MetricsAddr, when set, is the learner's Prometheus endpoint; policy
	// then env workers serve theirs at the next ports.
	MetricsAddr string
	// CPUProfiles, when set, is a folder for CPU profiles (pprof) of the
	// launcher (embedded NATS server included) and of every worker.
	CPUProfiles string
	// Quiet: no progress output from the learner.
	Quiet bool
	// Force, Resume: the run-directory mode, as herd train's.
	Force, Resume bool
	// Stdout gets the launcher's and the learner's output, Stderr the
	// workers' complaints and the restarts.
	Stdout, Stderr io.Writer
}

// Run launches the run and supervises it until the learner has finished
// (see the package doc). It returns nil for a completed run, an error
// wrapping context.Canceled for a run interrupted and saved by its
// learner, and any other error for a failure.
func Run(ctx context.Context, o Options) (err error) {
	if o.TTL < time.Second {
		return fmt.Errorf("launch: --ttl: must be >= %v, got %v", time.Second, o.TTL)
	}
	if o.Restarts < 0 {
		return fmt.Errorf("launch: --max-restarts: must be >= 0, got %d", o.Restarts)
	}
	if o.RestartWindow <= 0 {
		// A window of no length would count no failure: --max-restarts off.
		return fmt.Errorf("launch: --restart-window: must be > 0, got %v", o.RestartWindow)
	}
	stdout, stderr := &lockedWriter{w: orDiscard(o.Stdout)}, &lockedWriter{w: orDiscard(o.Stderr)}
	o.NATS.FromEnv()
	res := o.Resolved
	h := res.Header
	rc := h.Runtime
	st, err := launchSetup(res)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if o.CPUProfiles != "" {
		if err := os.MkdirAll(o.CPUProfiles, 0o755); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		stop, err := run.StartCPUProfile(filepath.Join(o.CPUProfiles, "launch.pprof"))
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		defer func() {
			if perr := stop(); perr != nil {
				// %v: an interrupted run whose profile was lost is a failure.
				err = fmt.Errorf("launch: %v", errors.Join(err, perr))
			}
		}()
	}
	// The learner applies the mode when it opens the run directory; the
	// launcher checks it first so that a refused run starts no process.
	mode, err := run.DirMode(o.Force, o.Resume)
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
	if !o.NoWorkers {
		if err := checkLocalWorkers(res, st); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	runID := o.Run
	if runID == "" {
		runID = "herd-" + strconv.FormatUint(h.Seed, 10)
	}
	if o.NoWorkers && o.NATS.URL == "" {
		return errors.New("launch: --no-workers needs --nats (the workers must reach the server)")
	}
	if o.NoWorkers && o.RegisterTimeout <= 0 {
		return fmt.Errorf("launch: --register-timeout: must be > 0, got %v", o.RegisterTimeout)
	}
	var srv *transport.Server // the embedded server, whose counters give the wire bytes
	if o.NATS.URL == "" {
		if srv, err = transport.StartServer(transport.ServerOptions{Host: "127.0.0.1", Generate: true}); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		defer srv.Shutdown()
		// The workers get the URL with its credentials through $HERD_NATS_URL,
		// never argv; everything printed goes through RedactURL.
		o.NATS.URL = srv.AuthURL()
	}
	n, closeConn, err := o.NATS.jetstream(transport.ConnName("herd launch", transport.KindMembership)) // config and membership
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer closeConn()
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
	if err := n.CreateBuckets(ctx, runID, o.TTL); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	mem, err := n.Membership(ctx, runID, transport.Options{TTL: o.TTL})
	if err != nil {
		return err
	}
	defer mem.Close()
	// A run ID in use belongs to a live run: taking it over would reset
	// that run's end mark and config under its learner.
	if err := distexec.CheckRunFree(ctx, mem, runID, o.TTL); err != nil {
		return fmt.Errorf("launch: %w; give another --run, or stop that run first", err)
	}
	if err := n.ResetRun(ctx, runID); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	// A finished or killed run of the same ID left its weights: a new run
	// starts without them (its learner's own initial weights, versions
	// from 0); a resumed one continues above them.
	if mode != algo.DirResume {
		if err := n.ClearWeights(ctx, runID); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	if err := n.PutRunConfig(ctx, runID, data); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	lease, err := mem.Register(ctx, ControllerName, []byte(strconv.Itoa(os.Getpid())))
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
			_ = n.EndRun(ectx, runID, controllerEndMark)
			cancel()
			_ = lease.Close()
		})
	}
	defer endRun()
	if o.NoWorkers {
		fmt.Fprintf(stdout, "controller for run %s on %s: waiting for the learner\n", runID, RedactURL(o.NATS.URL))
		return awaitLearner(ctx, learnerWait{
			mem:      mem,
			ended:    func(ctx context.Context) (string, bool, error) { return n.RunEnded(ctx, runID) },
			register: o.RegisterTimeout, save: stopSaveWait, notice: stdout,
			stop: func(ctx context.Context) error {
				if err := n.StopRun(ctx, runID, "the controller was interrupted"); err != nil {
					return err
				}
				return lease.Close()
			},
		})
	}

	self := o.WorkerCommand
	if self == nil {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		self = []string{exe}
	}
	// The URL reaches the workers through their environment, not their
	// command line, which every user of the machine can read.
	base := append([]string{"worker", "--run", runID, "--ttl", o.TTL.String()}, o.NATS.args()...)
	envs := fmt.Sprintf(" × %d envs", st.NumEnvs)
	switch {
	case flowPlan(rc):
		envs = " serving the plan's actors"
	case h.MultiAgent.Enabled():
		envs = fmt.Sprintf(" × %d agent rows (%d policies)", st.NumEnvs, len(h.MultiAgent.Policies))
	}
	fmt.Fprintf(stdout, "launching run %s: %s on %s%s, %s%s, %s, %s → %s\n",
		runID, h.Algo, h.Env, run.StepsNote(res), plural(max(rc.EnvWorkers, 1), "env worker"), envs,
		plural(st.PolicyWorkers(rc.PolicyWorkers), "policy worker"), plural(max(rc.Learners, 1), "learner"), h.Out)

	// What the learner runs (runLearner): a killed learner is started
	// again only where that run can resume.
	lr := *res
	if flowPlan(lr.Header.Runtime) {
		lr.Header.Runtime.Transport = "nats"
	} else {
		lr.Header.Runtime.Executor = "dist"
	}
	noResume, err := algo.WhyNotResumable(&lr, run.Executors())
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	started := time.Now()
	sup := (&supervisor{
		command: append(append([]string(nil), self...), base...),
		env:     append(os.Environ(), URLEnv+"="+o.NATS.URL),
		stderr:  stderr, ttl: o.TTL, restarts: o.Restarts, window: o.RestartWindow, endRun: endRun,
		profiles: o.CPUProfiles, noResume: noResume,
	}).init(ctx)
	nPolicy, nEnv := st.PolicyWorkers(rc.PolicyWorkers), max(rc.EnvWorkers, 1)
	margs := func(k int) []string { // the k-th worker's --metrics-addr after the learner's
		if o.MetricsAddr == "" {
			return nil
		}
		a, _ := prom.OffsetAddr(o.MetricsAddr, k) // checked below
		return []string{"--metrics-addr", a}
	}
	if o.MetricsAddr != "" {
		if _, err := prom.OffsetAddr(o.MetricsAddr, nPolicy+nEnv); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	for k := range nPolicy {
		sup.start("policy worker "+strconv.Itoa(k), append([]string{"--role", "policy", "--slot", strconv.Itoa(k)}, margs(1+k)...), true, io.Discard)
	}
	for k := range nEnv {
		sup.start("env worker "+strconv.Itoa(k), append([]string{"--role", "env", "--slot", strconv.Itoa(k)}, margs(1+nPolicy+k)...), true, io.Discard)
	}
	largs := []string{"--role", "learner", "--out", h.Out}
	if o.Quiet {
		largs = append(largs, "--quiet")
	}
	if o.MetricsAddr != "" {
		largs = append(largs, "--metrics-addr", o.MetricsAddr)
	}
	switch mode {
	case algo.DirForce:
		largs = append(largs, "--force")
	case algo.DirResume:
		largs = append(largs, "--resume")
	}
	sup.start("learner", largs, false, stdout)
	for j := 1; j < rc.Learners; j++ {
		sup.startPeer("learner "+strconv.Itoa(j), []string{"--role", "learner", "--slot", strconv.Itoa(j)}, io.Discard)
	}
	learnerExit, all := sup.wait()
	unsaved := false // interrupted, and the learner did not save the run
	switch {
	case ctx.Err() == nil || learnerExit == ExitOK:
	case learnerExit == ExitInterrupted && len(all) == 0:
		// The learner saved the interrupted run (its exit status says so).
		return fmt.Errorf("launch: run %s interrupted; the learner saved its checkpoint and metrics in %s: %w", runID, h.Out, context.Cause(ctx))
	default:
		all = append(all, fmt.Errorf("launch: run %s interrupted, and the learner did not save it (exit status %d)", runID, learnerExit))
		unsaved = true
	}
	if len(all) > 0 {
		// A failed run says so in its directory, whatever the learner
		// could still write.
		f := failedRun{res: res, causes: all, learnerExit: learnerExit, natsURL: o.NATS.URL, started: started,
			learnerMark: readEnd(func(ctx context.Context) (string, bool, error) { return n.RunEnded(ctx, runID) })}
		if where, err := f.record(); err != nil {
			all = append(all, err)
		} else {
			fmt.Fprintf(stderr, "launch: the failed run's summary is in %s\n", filepath.Join(where, algo.SummaryFile))
		}
	}
	if unsaved {
		// %v: a failure is never reported as a clean interruption.
		return fmt.Errorf("%v", errors.Join(all...))
	}
	if len(all) == 0 && srv != nil {
		// Every worker has exited, so its connections are closed and counted.
		if err := reportWire(stdout, srv, h.Out, h.Runtime); err != nil {
			fmt.Fprintf(stderr, "launch: wire bytes not reported: %v\n", err)
		}
	}
	if len(all) == 0 {
		fmt.Fprintln(stdout, run.WroteLine(h.Out))
	}
	return errors.Join(all...)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// plural writes n and a noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
	learners := max(rc.Learners, 1)
	procs := envW + polW + learners
	if limit := maxProcsPerCore * runtime.NumCPU(); procs > limit {
		return fmt.Errorf("%w: runtime.env_workers %d + policy_workers %d + %d learner(s) = %d worker processes, more than %d per core on this machine's %d cores (%d); "+
			"run them on more machines with --no-workers", algo.ErrConfig, envW, polW, learners, procs, maxProcsPerCore, runtime.NumCPU(), limit)
	}
	ex, _ := algo.FindExecutor(run.Executors(), rc.Executor)
	return algo.CheckMemory(res, algo.WorkersOf(ex, res.Header), algo.MemoryUse{Key: fmt.Sprintf("env_workers+policy_workers+learners=%d", procs),
		What: "worker processes", Bytes: float64(procs) * algo.ProcessBytes})
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
		return fmt.Errorf("%w %s: herd launch runs the dist executor, which saves no training state to continue from yet "+
			"(herd train --resume continues runs of the local executor); use --force to train it again from scratch, or another --out", algo.ErrCannotResume, dir)
	case mode == algo.DirNew && len(existing) > 0:
		return fmt.Errorf("%w: %s holds %v; use --force to replace it or another --out", algo.ErrRunExists, dir, existing)
	}
	return nil
}

// learnerWait is what a --no-workers controller watches and does: the
// run's membership and end mark, and how it stops the run.
type learnerWait struct {
	mem transport.Membership
	// ended reads the run's end mark (transport.NATS.RunEnded).
	ended func(context.Context) (string, bool, error)
	// stop asks the learner to stop and save the run (the controller was
	// interrupted), then closes the controller's registration.
	stop func(context.Context) error
	// register bounds the wait for the learner's registration (or its end
	// mark: a learner that fails before it registers leaves one).
	register time.Duration
	// save bounds the wait, after stop, for the learner's end mark.
	save time.Duration
	// notice, when set, is told when the learner is gone without a result
	// and when it is back.
	notice io.Writer
}

// awaitLearner returns when the learner has registered and then gone, or
// has already marked the run ended, with the learner's result read from
// the run's end mark: nil for a completed run, a *LearnerError otherwise.
// No learner within w.register is a failure naming it. When ctx ends (the
// controller's Ctrl-C) it asks the learner to stop and returns an error
// wrapping context.Canceled only when the learner's mark says it saved
// the interrupted run. Polling once a second is cheap next to a training
// run and avoids racing the first registration.
func awaitLearner(ctx context.Context, w learnerWait) error {
	const learner = "learner-0"
	t := time.NewTicker(time.Second)
	defer t.Stop()
	deadline := time.Now().Add(w.register)
	bg := context.WithoutCancel(ctx)
	registered := func(ctx context.Context) (bool, error) {
		ms, err := w.mem.Members(ctx)
		return slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name == learner }), err
	}
	for {
		ok, err := registered(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("launch: %w", err)
		}
		if ok {
			break
		}
		// A learner that registered, trained and left between two polls (a
		// short run: 50k CartPole steps take under a second), or failed
		// before it registered, is never seen here, but its end mark is:
		// the run's start cleared any older one, and the controller's own
		// mark comes only after this returns.
		if mark, ended, err := w.ended(ctx); err == nil && ended {
			return learnerResult(mark, ended)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: no learner registered within %v (--register-timeout), and none marked the run ended: "+
				"it was not started, or failed before it reached the NATS server (see its log)", w.register)
		}
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		}
		// A learner may have registered since the last poll: it is
		// training, and is asked to stop and save like any other.
		if ok, err := registered(bg); err != nil || !ok {
			// %v: nothing was trained, so nothing is saved.
			return fmt.Errorf("launch: stopped while waiting for the learner (%v): no learner registered, nothing saved", context.Cause(ctx))
		}
		break
	}
	for {
		// Watched past ctx's end: the learner's exit after a stop is awaited.
		gone, err := w.mem.Gone(bg, learner)
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		select {
		case <-gone:
		case <-ctx.Done():
			return stopLearner(ctx, w, gone)
		}
		mark, ended, err := w.ended(bg)
		if err != nil {
			return fmt.Errorf("launch: the learner is gone and its result unreadable: %w", err)
		}
		if ended {
			return learnerResult(mark, ended)
		}
		// Gone without a result: killed, or its machine lost. Its
		// orchestrator restarts it (compose's restart policy, a Job's
		// backoff), and the new learner resumes the run from its
		// checkpoints.
		lost := time.Now()
		if w.notice != nil {
			fmt.Fprintf(w.notice, "controller: %s is gone without a result; waiting up to %v for it to restart and resume\n", learner, w.register)
		}
		if ended, err := awaitRestart(ctx, w, registered, t.C); ended || err != nil {
			return err
		}
		if w.notice != nil {
			fmt.Fprintf(w.notice, "controller: %s is back after %v\n", learner, time.Since(lost).Round(time.Second))
		}
	}
}

// awaitRestart waits up to w.register for the learner to register again,
// polling on tick. A run marked ended meanwhile (a restarted learner that
// finished between two polls) ends the wait: ended, with its result.
func awaitRestart(ctx context.Context, w learnerWait, registered func(context.Context) (bool, error), tick <-chan time.Time) (ended bool, err error) {
	deadline := time.Now().Add(w.register)
	for {
		if ok, err := registered(ctx); err == nil && ok {
			return false, nil
		}
		if mark, ended, err := w.ended(ctx); err == nil && ended {
			return true, learnerResult(mark, ended)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("launch: the learner was gone without a result and did not restart within %v (--register-timeout): "+
				"the run is not finished", w.register)
		}
		select {
		case <-tick:
		case <-ctx.Done():
			return false, fmt.Errorf("launch: stopped while waiting for the learner to restart (%v); it was gone without a result", context.Cause(ctx))
		}
	}
}

// stopLearner asks the learner to stop once ctx has ended and waits up to
// w.save for its end mark: the controller's exit says whether the run was
// saved.
func stopLearner(ctx context.Context, w learnerWait, gone <-chan struct{}) error {
	bg := context.WithoutCancel(ctx)
	if err := w.stop(bg); err != nil {
		return fmt.Errorf("launch: interrupted (%v), and the learner could not be told to stop and save the run: %v", context.Cause(ctx), err)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	timeout := time.After(w.save)
	for {
		mark, ended, err := w.ended(bg)
		if err == nil && ended {
			lerr := learnerResult(mark, ended)
			var le *LearnerError
			if errors.As(lerr, &le) && le.Status == ExitInterrupted {
				return fmt.Errorf("launch: interrupted (%v); the learner saved the run: %w", context.Cause(ctx), lerr)
			}
			if lerr == nil {
				return nil // it completed before it heard of the stop
			}
			// %v: a failure is never reported as a clean interruption.
			return fmt.Errorf("launch: interrupted (%v), and the learner did not save the run: %v", context.Cause(ctx), lerr)
		}
		select {
		case <-t.C:
		case <-gone:
			gone = nil // its mark may still be on its way: read again
		case <-timeout:
			return fmt.Errorf("launch: interrupted (%v), and the learner did not report within %v that it saved the run: "+
				"its checkpoint and metrics may be missing", context.Cause(ctx), w.save)
		}
	}
}

// stopSaveWait bounds how long an interrupted --no-workers controller
// waits for its learner to save the run: a learner saves its checkpoint
// and metrics in seconds; a second Ctrl-C ends the wait at once.
const stopSaveWait = 2 * time.Minute
