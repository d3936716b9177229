package tune

import (
	"fmt"

	"herd/metrics"
)

// Plot draws PAL's Fig. 12 for a tuning run as a PNG at path: measured and
// fitted actor throughput f_a(x) and learner throughput U·f_l(x), both in
// env steps/s against the number of workers x, and the chosen allocation
// on each curve.
func Plot(path string, actors, learners []Point, fa, fl Amdahl, u float64, cores int, choice Allocation) error {
	fit := func(f Amdahl, scale float64) ([]float64, []float64) {
		var xs, ys []float64
		for i := 0; i <= 10*cores; i++ {
			x := 1 + float64(i)*float64(cores-1)/float64(10*cores)
			xs, ys = append(xs, x), append(ys, scale*f.At(x))
		}
		return xs, ys
	}
	pts := func(ps []Point, scale float64) ([]float64, []float64) {
		var xs, ys []float64
		for _, p := range ps {
			xs, ys = append(xs, float64(p.X)), append(ys, scale*p.Y)
		}
		return xs, ys
	}
	ax, ay := fit(fa, 1)
	lx, ly := fit(fl, u)
	max, may := pts(actors, 1)
	mlx, mly := pts(learners, u)
	return metrics.SaveLines(path, fmt.Sprintf("PAL design space, %d cores, U = %g env steps per update", cores, u),
		"workers (actors or learners)", "env steps/s",
		[]metrics.Series{
			{Name: "actors f_a(x), Amdahl fit (a prediction off the points)", X: ax, Y: ay},
			{Name: "learners U·f_l(x), Amdahl fit (a prediction off the points)", X: lx, Y: ly},
			{Name: "actors, measured", X: max, Y: may, Points: true},
			{Name: "learners, measured", X: mlx, Y: mly, Points: true},
			{Name: fmt.Sprintf("chosen: %d actors + %d learners", choice.Actors, choice.Learners),
				X: []float64{float64(choice.Actors), float64(choice.Learners)},
				Y: []float64{choice.ActorRate, choice.LearnerRate}, Points: true},
		})
}
