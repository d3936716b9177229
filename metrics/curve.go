package metrics

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"herd/metrics/tfevents"
)

// SaveCurve draws a learning curve (mean return of the last Window episodes
// against environment steps) as a PNG at path, using gonum.org/v1/plot.
// Points before the first finished episode (NaN) are skipped; with no point
// at all the plot is drawn empty rather than failing, so that an interrupted
// run still gets its curve.png.
func SaveCurve(path, title string, curve []Point) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "environment steps"
	p.Y.Label.Text = fmt.Sprintf("episode return (mean of last %d)", Window)
	p.Add(plotter.NewGrid())
	xys := make(plotter.XYs, 0, len(curve))
	for _, pt := range curve {
		if math.IsNaN(pt.ReturnMean) || math.IsInf(pt.ReturnMean, 0) {
			continue
		}
		xys = append(xys, plotter.XY{X: float64(pt.Step), Y: pt.ReturnMean})
	}
	if len(xys) > 0 {
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("curve: %w", err)
		}
		line.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
		line.Width = vg.Points(1.5)
		p.Add(line)
	}
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("curve: %w", err)
	}
	return nil
}

// EventsCurve draws the learning curve of a run from its TensorBoard event
// file (EventsFile in the run directory): the charts/return_mean_100
// scalar against steps, read back with tfevents.ReadFile, saved as a PNG
// at png by SaveCurve. It fails when the file holds no such scalar.
func EventsCurve(events, png, title string) error {
	tags, err := tfevents.ReadFile(events)
	if err != nil {
		return fmt.Errorf("curve: %w", err)
	}
	pts := tags["charts/return_mean_100"]
	if len(pts) == 0 {
		return fmt.Errorf("curve: %s holds no charts/return_mean_100 scalar", events)
	}
	curve := make([]Point, len(pts))
	for i, p := range pts {
		curve[i] = Point{Step: p.Step, ReturnMean: p.Value}
	}
	return SaveCurve(png, title, curve)
}
