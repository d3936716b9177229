package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"herd/run/distexec"
	"herd/worker"
)

// roleTiming is what `herd worker --cpuprofile FILE` writes to
// FILE.steps.json: an on-policy env worker's time per env step by phase
// and a policy worker's batches.
type roleTiming struct {
	env *worker.StepTiming
	pol *worker.PolicyTiming
	t0  time.Time
}

func timeRoles(st *distexec.Setup) *roleTiming {
	st.EnvTiming, st.PolicyTiming = &worker.StepTiming{}, &worker.PolicyTiming{}
	return &roleTiming{env: st.EnvTiming, pol: st.PolicyTiming, t0: time.Now()}
}

func writeTiming(path string, r *roleTiming) {
	wall := time.Since(r.t0)
	perStep := func(ns int64, steps int64) float64 {
		if steps == 0 {
			return 0
		}
		return float64(ns) / float64(steps) / 1e3
	}
	e, p := r.env, r.pol
	steps := e.Steps.Load()
	out := map[string]any{"wall_s": wall.Seconds()}
	if steps > 0 {
		known := e.Env.Load() + e.Infer.Load() + e.Sample.Load() + e.Push.Load()
		out["env_worker"] = map[string]any{
			"steps": steps, "requests": e.Requests.Load(),
			"us_per_env_step": map[string]float64{
				"env": perStep(e.Env.Load(), steps), "infer_wait": perStep(e.Infer.Load(), steps),
				"sample": perStep(e.Sample.Load(), steps), "push": perStep(e.Push.Load(), steps),
				"total": perStep(int64(wall), steps), "other": perStep(int64(wall)-known, steps),
			},
		}
	}
	if b := p.Batches.Load(); b > 0 {
		out["policy_worker"] = map[string]any{
			"batches": b, "requests": p.Requests.Load(), "rows": p.Rows.Load(),
			"rows_per_batch": float64(p.Rows.Load()) / float64(b), "requests_per_batch": float64(p.Requests.Load()) / float64(b),
			"busy_s": float64(p.Busy.Load()) / 1e9, "busy_share": float64(p.Busy.Load()) / float64(wall),
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: timing not written: %v\n", err)
	}
}
