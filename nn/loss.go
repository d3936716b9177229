package nn

import "math"

// MSE returns mean((pred − target)²) over all n elements and, if dPred is
// non-nil, writes dL/dpred = 2(pred − target)/n into it (torch
// F.mse_loss). Sums run in float64 in index order.
func MSE(dPred, pred, target []float32) float32 {
	return WeightedMSE(dPred, pred, target, nil)
}

// WeightedMSE returns mean(w·(pred − target)²) (w nil means 1; prioritized
// replay passes importance weights here) and writes its gradient
// 2w(pred − target)/n into dPred when non-nil.
func WeightedMSE(dPred, pred, target, w []float32) float32 {
	n := len(pred)
	checkLoss("WeightedMSE", dPred, pred, target, w)
	if n == 0 {
		return 0
	}
	inv := 1 / float64(n)
	var s float64
	for i, p := range pred {
		d := float64(p) - float64(target[i])
		wi := 1.0
		if w != nil {
			wi = float64(w[i])
		}
		s += wi * d * d
		if dPred != nil {
			dPred[i] = float32(2 * wi * d * inv)
		}
	}
	return float32(s * inv)
}

// Huber returns the mean Huber loss with threshold delta (torch
// F.huber_loss; with delta 1 it equals F.smooth_l1_loss, DQN's loss):
//
//	l(d) = ½d²            if |d| ≤ δ
//	l(d) = δ(|d| − ½δ)    otherwise,   d = pred − target
//
// and writes dL/dpred = clamp(d, −δ, δ)/n into dPred when non-nil.
func Huber(dPred, pred, target []float32, delta float32) float32 {
	return WeightedHuber(dPred, pred, target, nil, delta)
}

// WeightedHuber is Huber with per-element weights w (nil means 1).
func WeightedHuber(dPred, pred, target, w []float32, delta float32) float32 {
	n := len(pred)
	checkLoss("WeightedHuber", dPred, pred, target, w)
	if n == 0 {
		return 0
	}
	inv := 1 / float64(n)
	dl := float64(delta)
	var s float64
	for i, p := range pred {
		d := float64(p) - float64(target[i])
		wi := 1.0
		if w != nil {
			wi = float64(w[i])
		}
		var l, g float64
		if math.Abs(d) <= dl {
			l, g = 0.5*d*d, d
		} else {
			l, g = dl*(math.Abs(d)-0.5*dl), math.Copysign(dl, d)
		}
		s += wi * l
		if dPred != nil {
			dPred[i] = float32(wi * g * inv)
		}
	}
	return float32(s * inv)
}

func checkLoss(op string, dPred, pred, target, w []float32) {
	n := len(pred)
	if len(target) != n || (dPred != nil && len(dPred) != n) || (w != nil && len(w) != n) {
		shapePanic("%s: len(pred)=%d len(target)=%d len(dPred)=%d len(w)=%d", op, n, len(target), len(dPred), len(w))
	}
}
