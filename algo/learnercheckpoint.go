package algo

import "herd/internal/trainstate"

// LearnerCheckpoint is implemented by a SegmentLearner that saves its
// whole state as checkpoint sections and restores it bit for bit: the
// parameters, the optimizer's state, its counters and random streams, and
// whatever it keeps from one Learn call to the next (the behaviour
// parameters of HTS-RL's delayed gradient). An executor that resumes its
// runs (Executor.Resumable) saves it beside its own loop state.
type LearnerCheckpoint interface {
	// SaveLearner adds the learner's sections to sections.
	SaveLearner(sections map[string][]byte) error
	// RestoreLearner loads them from s into a freshly built learner of
	// the same run.
	RestoreLearner(s *trainstate.State) error
}
