package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"herd/algo"
	"herd/algo/all"
	"herd/env"
	"herd/internal/rng"
	"herd/metrics"
	"herd/run/hts"
)

// htsRow is one run of `herd bench hts`.
type htsRow struct {
	CV            float64 `json:"cv"`
	Mode          string  `json:"mode"`
	Seconds       float64 `json:"seconds"`
	StepsPerSec   float64 `json:"steps_per_sec"`
	Speedup       float64 `json:"speedup"`
	CollectMS     float64 `json:"collect_ms_per_step"`
	OverheadMS    float64 `json:"overhead_ms_per_step"`
	PredictedMS   float64 `json:"predicted_ms_per_step"`
	PredictionErr float64 `json:"prediction_err_pct"`
	ExactMS       float64 `json:"gamma_exact_ms_per_step"`
	ExactErr      float64 `json:"gamma_exact_err_pct"`
	// Eq7MS is nil where Eq. 7's limit falls outside its range (below the
	// mean step time).
	Eq7MS  *float64 `json:"eq7_ms_per_step"`
	Eq7Err *float64 `json:"eq7_err_pct"`
}

func newHTSCmd() *cobra.Command {
	var (
		config, dist, cvList, png string
		mean                      time.Duration
		tailProb, tailFactor      float64
		segments, pw, ew          int
		asJSON                    bool
	)
	cmd := &cobra.Command{
		Use:   "hts",
		Short: "env steps/s of HTS vs synchronous collection as step-time variance grows, and Claim 1's prediction",
		Long: `hts trains the config's on-policy algorithm for --segments segments under HTS
and under the synchronous baseline (a barrier after every step, no overlap),
for envs whose step times have mean --mean and each coefficient of variation
in --cvs, and prints steps/s, the speed-up, and the measured collection time
per step next to HTS-RL's Claim 1 evaluated for the same distribution two
three ways: by Monte Carlo for the actual distribution (predicted_ms),
exactly for Gamma step times of the same mean and variance (gamma_exact_ms),
and by the paper's Eq. 7, the Gumbel extreme-value limit (eq7_ms; "–" where
the limit falls below the mean, as it does for a segment's long sums over
a few envs), each with its error against the measurement. Both add a per-step overhead (inference round trip, sleep
overshoot, barrier) measured once per mode by a separate calibration run
with constant step times (CV 0) of the same mean, never by the runs
predicted.`,
		Example: `  herd bench hts --config configs/ppo-cartpole-hts.yaml --cvs 0.5,1,2,3 --png hts-cv.png`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cvs, err := parseFloats(cvList)
			if err != nil {
				return fmt.Errorf("bench hts: --cvs: %w", err)
			}
			if segments < 1 || mean <= 0 || pw < 0 || ew < 0 {
				return fmt.Errorf("bench hts: --segments (%d) must be ≥ 1, --mean (%v) > 0, --policy-workers and --env-workers ≥ 0", segments, mean)
			}
			data, err := algo.ReadConfig(config)
			if err != nil {
				return fmt.Errorf("bench hts: %w", err)
			}
			st := env.StepTime{Mean: mean, Dist: dist, TailProb: tailProb, TailFactor: tailFactor}
			if err := st.Validate(); err != nil {
				return fmt.Errorf("bench hts: %w", err)
			}
			rows, err := benchHTS(cmd.Context(), data, cvs, st, segments, pw, ew)
			if len(rows) > 0 {
				if werr := writeRows(cmd.OutOrStdout(), asJSON, rows); werr != nil {
					return werr
				}
			}
			if err != nil {
				return err
			}
			if png != "" {
				var hx, hy, sx, sy []float64
				for _, r := range rows {
					if r.Mode == "hts" {
						hx, hy = append(hx, r.CV), append(hy, r.StepsPerSec)
					} else {
						sx, sy = append(sx, r.CV), append(sy, r.StepsPerSec)
					}
				}
				return metrics.SaveLines(png, fmt.Sprintf("env steps/s, step time mean %v (%s)", mean, dist),
					"coefficient of variation of the step time", "env steps/s",
					[]metrics.Series{{Name: "HTS", X: hx, Y: hy}, {Name: "synchronous", X: sx, Y: sy}})
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&config, "config", "configs/ppo-cartpole-hts.yaml", "on-policy run config (its runtime section is overridden)")
	fl.StringVar(&cvList, "cvs", "0.5,1,2,3", "coefficients of variation of the step time")
	fl.DurationVar(&mean, "mean", time.Millisecond, "mean env step time")
	fl.StringVar(&dist, "dist", "lognormal", "step-time distribution: lognormal or gamma")
	fl.Float64Var(&tailProb, "tail-prob", 0, "probability that a step stalls (heavy tail)")
	fl.Float64Var(&tailFactor, "tail-factor", 0, "how many times longer a stalled step takes")
	fl.IntVar(&segments, "segments", 3, "segments (iterations) per run")
	fl.IntVar(&pw, "policy-workers", 0, "policy workers (0: the config's, default 1)")
	fl.IntVar(&ew, "env-workers", 0, "env workers (0: the config's, default one per env)")
	fl.StringVar(&png, "png", "", "write the steps/s against CV plot here")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line instead of a table")
	return cmd
}

func benchHTS(ctx context.Context, data []byte, cvs []float64, st env.StepTime, segments, pw, ew int) ([]htsRow, error) {
	exec := "hts"
	res, err := algo.Resolve(data, all.Specs(), algo.Overrides{})
	if err != nil {
		return nil, err
	}
	shape, ok := res.Config.(algo.Rollout)
	if !ok {
		return nil, fmt.Errorf("bench hts: %s is not an on-policy algorithm", res.Spec.Name)
	}
	n, T, _ := shape.RolloutShape()
	rc := res.Header.Runtime
	rc.Executor = exec
	if rc.Alpha > 0 {
		T = rc.Alpha
	}
	if pw > 0 {
		rc.PolicyWorkers = pw
	}
	if ew > 0 {
		rc.EnvWorkers = ew
	}
	h := res.Header
	h.Steps = int64(segments * n * T)
	h.Runtime = rc
	run := func(sync bool, stp *env.StepTime) (time.Duration, hts.Timing, error) {
		opt := hts.OptionsOf(h)
		opt.StepTime, opt.Sync = stp, sync
		var tm hts.Timing
		opt.Timing = &tm
		t0 := time.Now()
		_, err := hts.Train(ctx, &algo.Runtime{Header: h, Log: algo.Discard()}, res.Spec, res.Config, opt)
		return time.Since(t0), tm, err
	}
	// The per-step overhead besides the step time, per mode, from a
	// separate calibration run whose steps all take the mean (CV 0, no
	// tail): its collection time per step minus the mean is the inference
	// round trip, env compute, the sleep's overshoot and, for the
	// synchronous mode, the barrier.
	overhead := map[bool]time.Duration{}
	cal := env.StepTime{Mean: st.Mean, Dist: st.Dist}
	for _, sync := range []bool{true, false} {
		_, base, err := run(sync, &cal)
		if err != nil {
			return nil, err
		}
		overhead[sync] = max(0, base.Collect/time.Duration(base.Segments*base.StepsPerEnv)-st.Mean)
	}
	var rows []htsRow
	for k, cv := range cvs {
		s := st
		s.CV = cv
		if err := s.Validate(); err != nil {
			return rows, fmt.Errorf("bench hts: %w", err)
		}
		predSync := hts.Predict(s, n, T, overhead[true], 2000, rng.New(1, "bench/hts-predict", k))
		predHTS := hts.Predict(s, n, T, overhead[false], 2000, rng.New(1, "bench/hts-predict", k))
		exSync, exHTS := hts.GammaExact(s, n, T, overhead[true]), hts.GammaExact(s, n, T, overhead[false])
		e7Sync, e7HTS := hts.Eq7(s, n, T, overhead[true]), hts.Eq7(s, n, T, overhead[false])
		var pair [2]htsRow
		// Alternate which mode runs first so drift in the machine's speed
		// does not favour one.
		order := []bool{true, false}
		if k%2 == 1 {
			order = []bool{false, true}
		}
		for _, sync := range order {
			wall, tm, err := run(sync, &s)
			if err != nil {
				return rows, err
			}
			r := htsRow{CV: cv, Mode: "hts", Seconds: wall.Seconds(), StepsPerSec: float64(h.Steps) / wall.Seconds(),
				CollectMS: float64(tm.Collect) / float64(tm.Segments*tm.StepsPerEnv) / 1e6}
			p, ex, e7, ok7, o := predHTS.HTS, exHTS.HTS, e7HTS.HTS, e7HTS.HTSOK, overhead[false]
			if sync {
				r.Mode, p, ex, e7, ok7, o = "sync", predSync.Sync, exSync.Sync, e7Sync.Sync, e7Sync.SyncOK, overhead[true]
			}
			r.OverheadMS = float64(o) / 1e6
			r.PredictedMS = float64(p) / 1e6
			r.PredictionErr = 100 * (r.CollectMS - r.PredictedMS) / r.PredictedMS
			r.ExactMS = float64(ex) / 1e6
			r.ExactErr = 100 * (r.CollectMS - r.ExactMS) / r.ExactMS
			if ok7 {
				ms := float64(e7) / 1e6
				pct := 100 * (r.CollectMS - ms) / ms
				r.Eq7MS, r.Eq7Err = &ms, &pct
			}
			if sync {
				pair[0] = r
			} else {
				pair[1] = r
			}
		}
		pair[1].Speedup = pair[1].StepsPerSec / pair[0].StepsPerSec
		pair[0].Speedup = 1
		rows = append(rows, pair[0], pair[1])
	}
	return rows, nil
}

// parseFloats reads "0.5,1,2".
func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		if !(v >= 0) {
			return nil, fmt.Errorf("%v must be ≥ 0", v)
		}
		out = append(out, v)
	}
	return out, nil
}
