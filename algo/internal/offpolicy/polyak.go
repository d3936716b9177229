package offpolicy

// Polyak moves a target network's parameters towards the online ones
// (Lillicrap et al. 2016, DDPG, Algorithm 1):
//
//	θ' ← τ·θ + (1 − τ)·θ'
//
// dst holds θ' and is updated in place; src holds θ. τ = 1 is a hard copy
// (DQN's periodic target update). The slices must have equal length; the
// shorter length is used otherwise.
func Polyak(dst, src []float32, tau float32) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	if tau == 1 {
		copy(dst, src)
		return
	}
	keep := 1 - tau
	for i := range dst {
		dst[i] = tau*src[i] + keep*dst[i]
	}
}
