package launch

import (
	"context"
	"fmt"
	"strconv"

	"herd/algo"
	"herd/flow"
	"herd/run/distexec"
	"herd/transport"
)

// The flow executor under herd launch: env worker k serves actor
// flow.ActorName(k) of the plan (flow.ServeWorker) and the learner process
// drives the plan (flow.TrainServed), both over the run's actor calls on
// the inference connection. There are no policy workers.

// flowPlan reports whether rc runs a flow plan, whose env workers serve
// the plan's actors over actor calls instead of stepping for a learner.
func flowPlan(rc algo.RuntimeConfig) bool { return rc.Executor == "flow" }

// launchSetup checks the config herd launch was given: the dist
// executor's topology, or a flow plan (a Setup with no policy workers).
func launchSetup(res *algo.Resolved) (*distexec.Setup, error) {
	rc := res.Header.Runtime
	switch rc.Executor {
	case "dist":
		return distexec.PrepareRun(res)
	case "flow":
		if err := algo.Admit(flow.Executor(), res.Header, res.Spec, res.Others); err != nil {
			return nil, err
		}
		if rc.EnvWorkers == 0 {
			// The plan's default depends on the algorithm; launch must know
			// how many worker processes to start.
			return nil, fmt.Errorf("%w: herd launch with executor flow needs runtime.env_workers written out", algo.ErrConfig)
		}
		return &distexec.Setup{Header: res.Header, Off: &distexec.OffSetup{EnvWorkers: rc.EnvWorkers}}, nil
	}
	return nil, fmt.Errorf("the config's runtime.executor must be dist or flow, got %q", rc.Executor)
}

// callStream returns the run's actor calls on tr.
func callStream(ctx context.Context, tr transport.Transport, run string) (transport.CallStream, error) {
	ct, ok := tr.(transport.CallTransport)
	if !ok {
		return nil, fmt.Errorf("transport %T carries no actor calls", tr)
	}
	return ct.Calls(ctx, run, transport.Options{})
}

// serveFlowWorker serves env worker slot of a flow run until ctx ends.
func serveFlowWorker(ctx context.Context, res *algo.Resolved, tr transport.Transport, run string, slot int) error {
	calls, err := callStream(ctx, tr, run)
	if err != nil {
		return err
	}
	defer calls.Close()
	return flow.ServeWorker(ctx, res.Header, res.Spec, res.Config, calls, flow.ActorName(slot))
}

// trainFlowDriver runs the plan with its workers in the env worker
// processes. mem tells it which process serves each worker's actor (the
// process id an env worker registers with), so that a call to a worker
// killed and started again by the supervisor ends as soon as the new
// process registers.
func trainFlowDriver(ctx context.Context, rt *algo.Runtime, spec algo.Spec, cfg algo.Config, tr transport.Transport, run string, mem transport.Membership) (algo.Model, error) {
	calls, err := callStream(ctx, tr, run)
	if err != nil {
		return nil, err
	}
	defer calls.Close()
	names := map[string]string{} // actor → registration
	for k := range max(rt.Header.Runtime.EnvWorkers, 1) {
		names[flow.ActorName(k)] = "env-" + strconv.Itoa(k)
	}
	whoServes := func(ctx context.Context, actor string) (string, error) {
		ms, err := mem.Members(ctx)
		if err != nil {
			return "", err
		}
		for _, m := range ms {
			if m.Name == names[actor] {
				return string(m.Info), nil
			}
		}
		return "", nil
	}
	return flow.TrainServed(ctx, rt, spec, cfg, calls, whoServes)
}
