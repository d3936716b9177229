package offpolicy

// Transition is one (possibly n-step) transition ready for a replay buffer:
//
//	(Obs, Action) → Reward = Σ_{k<m} γ^k r_{t+k}, NextObs = s_{t+m},
//	Discount = γ^m, Done = the episode terminated at t+m.
//
// The learner's target is Reward + Discount·(1−Done)·V(NextObs). Obs, Action
// and NextObs alias the accumulator's storage: they are valid until the next
// Push.
type Transition struct {
	Obs      []float32
	Action   []float32
	Reward   float32
	NextObs  []float32
	Discount float32
	Done     bool
}

// NStep turns the one-step transitions of a single environment into n-step
// transitions (Sutton & Barto §7.1; Rainbow, Hessel et al. 2018, eq. 2):
// the transition that starts at t is ready once n more steps have been taken
// or the episode has ended, whichever comes first.
//
// Episode ends are the easy-to-miss part. On termination every pending
// transition is emitted with Done set, so it does not bootstrap. On
// truncation (a time limit) every pending transition is emitted with Done
// clear and NextObs set to the true final observation of the episode, so the
// learner bootstraps from the state the episode was cut in, not from the
// first state of the next episode. A pending transition that is shorter than
// n carries its own Discount γ^m.
//
// With n = 1 NStep is a pass-through that only adds Discount = γ.
//
// Cost: Push copies one observation pair and one action; Pop is O(n). No
// allocation after NewNStep. An NStep is not safe for concurrent use; keep
// one per environment.
type NStep struct {
	n      int
	gamma  float32
	obsDim int
	actDim int

	obs  []float32 // ring of n observations
	act  []float32 // ring of n actions
	rew  []float32 // ring of n rewards
	next []float32 // the newest next observation

	head    int  // ring index of the oldest pending step
	count   int  // pending steps
	ready   int  // how many Pops are ready
	flushed bool // the episode ended; every pending step is ready
	term    bool // the episode ended by termination
}

// NewNStep returns an accumulator for n-step returns with discount gamma
// over observations of obsDim and actions of actDim floats. n must be ≥ 1.
func NewNStep(n int, gamma float32, obsDim, actDim int) *NStep {
	if n < 1 {
		n = 1
	}
	return &NStep{
		n: n, gamma: gamma, obsDim: obsDim, actDim: actDim,
		obs:  make([]float32, n*obsDim),
		act:  make([]float32, n*actDim),
		rew:  make([]float32, n),
		next: make([]float32, obsDim),
	}
}

// Push records one environment step (obs, action) → (reward, nextObs) with
// the step's terminated and truncated flags; nextObs must be the true next
// observation (the final observation when the episode ended). Call Pop until
// it returns false before the next Push: transitions not popped by then are
// dropped.
func (s *NStep) Push(obs, action []float32, reward float32, nextObs []float32, terminated, truncated bool) {
	if s.flushed {
		// The previous episode ended: anything not popped is dropped and a
		// new episode starts empty.
		s.head, s.count, s.flushed, s.term = 0, 0, false, false
	} else if s.ready > 0 {
		// A full ring whose oldest step was not popped: drop it.
		s.head = (s.head + 1) % s.n
		s.count--
	}
	s.ready = 0
	i := (s.head + s.count) % s.n
	copy(s.obs[i*s.obsDim:(i+1)*s.obsDim], obs)
	copy(s.act[i*s.actDim:(i+1)*s.actDim], action)
	s.rew[i] = reward
	copy(s.next, nextObs)
	s.count++
	switch {
	case terminated || truncated:
		s.flushed, s.term = true, terminated
		s.ready = s.count
	case s.count == s.n:
		s.ready = 1
	}
}

// Pop writes the next ready transition into dst and reports whether there
// was one. Transitions come out oldest first.
func (s *NStep) Pop(dst *Transition) bool {
	if s.ready == 0 {
		return false
	}
	// The oldest pending step's return runs over every pending step: either
	// exactly n of them, or all that remain of an ended episode.
	var ret float32
	disc := float32(1)
	for k := 0; k < s.count; k++ {
		ret += disc * s.rew[(s.head+k)%s.n]
		disc *= s.gamma
	}
	h := s.head
	dst.Obs = s.obs[h*s.obsDim : (h+1)*s.obsDim]
	dst.Action = s.act[h*s.actDim : (h+1)*s.actDim]
	dst.Reward = ret
	dst.NextObs = s.next
	dst.Discount = disc
	dst.Done = s.flushed && s.term
	s.head = (s.head + 1) % s.n
	s.count--
	s.ready--
	return true
}

// Pending reports how many steps are waiting for enough future rewards.
func (s *NStep) Pending() int { return s.count }
