package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WriteFailed writes summary.json in dir for a run that ended without its
// recorder's Close (a learner process killed, or one that failed before
// it opened its files), so that the failure is on record: s as given
// (algo, env, seed, planned steps, wall time, Reason), with StatusFailed
// and what the last complete metrics.csv row says (steps, episodes, the
// return window and the dist/… counters). A metrics.csv that ends in a
// partly written row is cut back to its last complete row. Files older
// than since belong to an earlier run in dir (one being replaced) and are
// ignored. A summary.json written since is the run's own and is never
// replaced: written is false then.
func WriteFailed(dir string, s Summary, since time.Time) (written bool, err error) {
	path := filepath.Join(dir, "summary.json")
	if fi, err := os.Stat(path); err == nil && !fi.ModTime().Before(since) {
		return false, nil
	}
	s.Status, s.Interrupted = StatusFailed, false
	s.FinalReturnMean100, s.FinalReturnStd100, s.FinalLengthMean100 = math.NaN(), math.NaN(), math.NaN()
	if err := lastRow(filepath.Join(dir, "metrics.csv"), since, &s); err != nil {
		return false, fmt.Errorf("metrics: %w", err)
	}
	if s.WallSeconds > 0 {
		s.SPS = float64(s.Steps) / s.WallSeconds
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("metrics: %w", err)
	}
	if err := writeSummary(path, s); err != nil {
		return false, fmt.Errorf("metrics: %w", err)
	}
	return true, nil
}

// lastRow fills s from the last complete row of the metrics.csv at path,
// when it was written since, after cutting off a partly written row.
func lastRow(path string, since time.Time, s *Summary) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.ModTime().Before(since)) {
		return nil
	}
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if end := bytes.LastIndexByte(data, '\n') + 1; end < len(data) {
		if err := os.Truncate(path, int64(end)); err != nil {
			return fmt.Errorf("cut the partly written row of %s: %w", path, err)
		}
		data = data[:end]
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 2 {
		return nil // no row yet (or not even the header)
	}
	cols, vals := strings.Split(lines[0], ","), strings.Split(lines[len(lines)-1], ",")
	if len(cols) != len(vals) {
		return fmt.Errorf("%s: the last row has %d values for %d columns", path, len(vals), len(cols))
	}
	for i, c := range cols {
		if vals[i] == "" {
			continue
		}
		v, err := strconv.ParseFloat(vals[i], 64)
		if err != nil {
			return fmt.Errorf("%s: column %s: %w", path, c, err)
		}
		switch {
		case c == "step":
			s.Steps = int64(v)
		case c == "episodes":
			s.Episodes = int64(v)
		case c == "return_mean_100":
			s.FinalReturnMean100 = v
		case c == "return_std_100":
			s.FinalReturnStd100 = v
		case c == "length_mean_100":
			s.FinalLengthMean100 = v
		case strings.HasPrefix(c, "dist/") && !math.IsNaN(v):
			if s.Dist == nil {
				s.Dist = map[string]float64{}
			}
			s.Dist[c] = v
		}
	}
	return nil
}
