package run

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"herd/algo"
	"herd/metrics"
	"herd/metrics/prom"
)

// DirMode maps the --force and --resume flags to the run-directory mode.
func DirMode(force, resume bool) (algo.DirMode, error) {
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

// IsTerminal reports whether w is a character device (a terminal), where a
// progress bar makes sense; pipes and files get plain lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// StepsNote says, when the algorithm trains whole rollouts and the steps
// asked for are not a multiple of one, how many it will take instead.
func StepsNote(res *algo.Resolved) string {
	steps, unit := res.StepsRun()
	if steps == res.Header.Steps {
		return ""
	}
	what := "whole rollouts of num_envs × num_steps"
	if res.Header.Runtime.Learners > 1 {
		what = "whole updates of learners × num_envs × num_steps"
	}
	return fmt.Sprintf(" (rounded down to %d × %d = %d steps: %s)", steps/unit, unit, steps, what)
}

// WroteLine names the files of a finished run in dir.
func WroteLine(dir string) string {
	return "wrote " + filepath.Join(dir, "{config.yaml,metrics.csv,summary.json,curve.png,model.safetensors,"+metrics.EventsFile+"}")
}

// DoneLine sums up a finished run in one line.
func DoneLine(s metrics.Summary) string {
	return fmt.Sprintf("done: %d steps in %.1f s (%.0f steps/s), %d episodes, return (last 100) %.2f ± %.2f",
		s.Steps, s.WallSeconds, s.SPS, s.Episodes, s.FinalReturnMean100, s.FinalReturnStd100)
}

// ServeLive serves a run's live metrics for Prometheus at addr
// (prom.Serve) and says where on w; the caller closes the server.
func ServeLive(w io.Writer, addr string) (*prom.Live, *prom.Server, error) {
	live := prom.NewLive()
	srv, err := prom.Serve(addr, live)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "metrics for Prometheus at http://%s/metrics\n", srv.Addr())
	return live, srv, nil
}
