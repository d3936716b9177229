package metrics

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one named line of a SaveLines plot.
type Series struct {
	Name string
	X, Y []float64
	// Points draws markers only (for a chosen point), no line.
	Points bool
}

// palette is matplotlib's default cycle, so herd's plots look familiar.
var palette = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255},
	{214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}

// SaveLines draws named series against one x axis as a PNG at path (bench
// plots such as steps/s against CV, or throughput curves).
func SaveLines(path, title, xLabel, yLabel string, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for k, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot %s: series %q has %d x and %d y values", path, s.Name, len(s.X), len(s.Y))
		}
		xys := make(plotter.XYs, len(s.X))
		for i := range s.X {
			xys[i] = plotter.XY{X: s.X[i], Y: s.Y[i]}
		}
		c := palette[k%len(palette)]
		if s.Points {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return fmt.Errorf("plot %s: %w", path, err)
			}
			sc.Color, sc.Shape, sc.Radius = c, draw.CircleGlyph{}, vg.Points(5)
			p.Add(sc)
			p.Legend.Add(s.Name, sc)
			continue
		}
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		line.Color, line.Width, pts.Color = c, vg.Points(1.5), c
		p.Add(line, pts)
		p.Legend.Add(s.Name, line, pts)
	}
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
