// Package launch runs a distributed herd topology as processes: the
// launcher (Run) and the worker process it starts (RunWorker).
//
// # The launcher
//
// Run resolves nothing itself: it takes an algo.Resolved config whose
// runtime.executor is dist, checks the run directory and the machine
// before any process starts, starts an embedded NATS server (or uses
// Options.NATS.URL), stores the config in the run, registers as the run's
// controller and starts the worker processes: runtime.env_workers env
// workers, the policy workers and one learner, each `herd worker`
// (Options.WorkerCommand). It supervises them:
//
//   - an env or policy worker that exits is restarted with exponential
//     back-off, until it fails more than Options.Restarts times within
//     Options.RestartWindow (restartBudget);
//   - a learner killed by a signal is restarted at once within the same
//     budget, and resumes the run from its checkpoints (RunWorker: a
//     learner whose start count is above 1 resumes);
//   - the run ends when the learner exits; the controller's registration
//     is then closed, which tells every other worker to exit, and a worker
//     that lingers past two TTLs is killed;
//   - on Ctrl-C (ctx cancelled) the learner is stopped first, so that it
//     saves the interrupted run, then the others;
//   - a run that fails leaves a summary.json that says so and why: where
//     the learner could not write one, the launcher writes it from what
//     it knows (failedRun.record).
//
// The embedded server listens on loopback only and admits one user whose
// name and password are drawn from crypto/rand for each run (a secret must
// not follow from the run seed); the workers get the URL with them through
// $HERD_NATS_URL, never their command line. An external server's URL,
// credentials file and TLS options (a tls:// URL, --nats-tls-ca,
// --nats-tls-cert, --nats-tls-key) come from the flags or the environment.
// A URL is printed, written to config.yaml or quoted in an error only with
// its user information replaced by "***" (RedactURL, internal/redact).
//
// With Options.NoWorkers it is the controller only: the workers run
// elsewhere (deploy/: compose, Kubernetes) and Run waits for the learner's
// result, which the learner leaves in a registration of its own.
//
// # Exit statuses
//
// A worker process and the launcher report their outcome with the same
// three statuses (ExitOK, ExitInterrupted, ExitFailed), mapped from errors
// by ExitStatus: an error that wraps context.Canceled and nothing that
// failed is a clean interruption (the run was saved). A learner's status
// reaches a --no-workers controller as a *LearnerError, which unwraps to
// context.Canceled when the learner was interrupted and saved its run.
//
// # The worker
//
// RunWorker joins a run in one role (env, policy or learner): it reads the
// run's config from NATS, waits for the controller's registration,
// registers itself with a keep-alive and runs its part of the dist
// executor (herd/run/distexec) until the controller's registration is
// gone. The learner writes the run directory through algo.TrainRun.
package launch
