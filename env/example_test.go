package env_test

import (
	"fmt"

	"herd/env"
	"herd/internal/rng"
)

// A random policy on 8 CartPoles stepped together: the loop an algorithm
// runs, with the policy replaced by sampling. Observations arrive as one
// flat batch; actions go back as one flat []float32 (one value per env for a
// Discrete space, Dim values per env for a Box). Nothing here allocates
// after the first Step.
func Example_vectorRandomPolicy() {
	const numEnvs, steps, seed = 8, 1000, 1
	envs, err := env.MakeVector("CartPole-v1", numEnvs, env.Sync, env.WithEpisodeStatistics())
	if err != nil {
		panic(err)
	}
	defer envs.Close()

	actDim := envs.ActionSpace().Dim()
	actions := make([]float32, numEnvs*actDim) // reused every step
	r := rng.New(seed, "example/policy", 0)

	batch, err := envs.Reset(seed)
	if err != nil {
		panic(err)
	}
	episodes, totalReturn := 0, 0.0
	for step := 0; step < steps; step++ {
		// Policy: batch.Obs holds numEnvs rows of batch.ObsDim values.
		for i := 0; i < numEnvs; i++ {
			envs.ActionSpace().SampleTo(actions[i*actDim:(i+1)*actDim], r)
		}
		batch, err = envs.Step(actions)
		if err != nil {
			panic(err)
		}
		for i := 0; i < numEnvs; i++ {
			// The transition is (obs_i, a_i, Rewards[i], NextObsRow(i)):
			// NextObsRow is the true final observation when the episode
			// ended (bootstrap from it if Truncated[i] and not
			// Terminated[i]); batch.ObsRow(i) already starts the next one.
			_ = batch.NextObsRow(i)
			if batch.Infos[i].HasEpisode {
				episodes++
				totalReturn += batch.Infos[i].Episode.Return
			}
		}
	}
	fmt.Println(episodes > 0, totalReturn/float64(episodes) < 100)
	// Output: true true
}
