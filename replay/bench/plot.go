package bench

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot writes the figures of PAL (Zhang et al. 2021) that rows can fill into dir and
// returns the files written:
//   - fig9_<op>.png for tree_set and tree_sample: latency per batch
//     against K, one line per capacity (the paper's Fig. 9);
//   - fig10_mixed.png: time per learner batch against threads, one line
//     per variant (Fig. 10);
//   - growth_<op>.png: latency against capacity, one line per K.
func Plot(dir string, rows []Row) ([]string, error) {
	var files []string
	for _, op := range []string{"tree_set", "tree_sample"} {
		byCap := map[int]plotter.XYs{}
		byK := map[int]plotter.XYs{}
		for _, r := range rows {
			if r.Op == op {
				byCap[r.Capacity] = append(byCap[r.Capacity], plotter.XY{X: float64(r.Fanout), Y: r.NsPerOp / 1000})
				byK[r.Fanout] = append(byK[r.Fanout], plotter.XY{X: float64(r.Capacity), Y: r.NsPerOp / 1000})
			}
		}
		if len(byCap) == 0 {
			continue
		}
		f := filepath.Join(dir, "fig9_"+op+".png")
		if err := linePlot(f, op+" latency vs fanout (batch per op)", "fanout K", "µs per batch", byCap, "N=%d", true, false); err != nil {
			return files, err
		}
		files = append(files, f)
		if len(byCap) > 1 {
			f := filepath.Join(dir, "growth_"+op+".png")
			if err := linePlot(f, op+" latency vs capacity", "capacity N", "µs per batch", byK, "K=%d", true, false); err != nil {
				return files, err
			}
			files = append(files, f)
		}
	}
	byVar := map[string]plotter.XYs{}
	for _, r := range rows {
		if r.Op == "mixed" {
			key := fmt.Sprintf("%s K=%d N=%d", r.Variant, r.Fanout, r.Capacity)
			byVar[key] = append(byVar[key], plotter.XY{X: float64(r.Threads), Y: r.NsPerOp / 1000})
		}
	}
	if len(byVar) > 0 {
		m := map[int]plotter.XYs{}
		names := map[int]string{}
		keys := make([]string, 0, len(byVar))
		for k := range byVar {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			m[i], names[i] = byVar[k], k
		}
		f := filepath.Join(dir, "fig10_mixed.png")
		if err := linePlotNamed(f, "mixed workload: time per learner batch vs threads", "threads", "µs per learner batch", m, names, false, false); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

func linePlot(file, title, xl, yl string, lines map[int]plotter.XYs, nameFmt string, logX, logY bool) error {
	names := map[int]string{}
	for k := range lines {
		names[k] = fmt.Sprintf(nameFmt, k)
	}
	return linePlotNamed(file, title, xl, yl, lines, names, logX, logY)
}

func linePlotNamed(file, title, xl, yl string, lines map[int]plotter.XYs, names map[int]string, logX, logY bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	keys := make([]int, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var args []any
	for _, k := range keys {
		xy := lines[k]
		slices.SortFunc(xy, func(a, b plotter.XY) int {
			switch {
			case a.X < b.X:
				return -1
			case a.X > b.X:
				return 1
			}
			return 0
		})
		args = append(args, names[k], xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}
