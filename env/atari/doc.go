// Package atari holds the Atari preprocessing wrappers of DQN's training
// protocol as Stable-Baselines3's atari_wrappers.py and Gymnasium 0.29's
// ResizeObservation, GrayScaleObservation and FrameStack apply them, and
// as CleanRL's ppo_atari.py and dqn_atari.py stack them. They wrap any
// herd env (core.Env): a served Gymnasium ALE env (grpc://…), a Go env,
// another wrapper.
//
// Most users name them in the env id, WRAPPERS:ID, which env.Make and
// env.MakeVector understand wherever an id goes (configs, `herd train
// --env`, checkpoints, distributed workers):
//
//	atari:grpc://HOST:PORT/BreakoutNoFrameskip-v4
//	max_and_skip=2,frame_stack=4:MinAtar/Breakout-v1
//
// WRAPPERS is a comma-separated list, the first innermost:
//
//	noop_reset=N     1…N no-op steps (action index 0) after each reset; N default 30 (NoopResetEnv)
//	max_and_skip=K   each action K times, rewards summed, the max of the last two frames; K default 4 (MaxAndSkipEnv)
//	episodic_life    a lost life ends the episode; the next reset steps a no-op unless the game is over (EpisodicLifeEnv)
//	fire_reset       FIRE (index 1) then index 2 after each reset (FireResetEnv)
//	clip_reward      the reward's sign (ClipRewardEnv)
//	resize=N|HxW     area resize to H×W; default 84×84 (ResizeObservation: cv2.INTER_AREA)
//	grayscale        RGB to gray (GrayScaleObservation: cv2.COLOR_RGB2GRAY)
//	frame_stack=K    the last K frames along the channel axis; K default 4 (FrameStack)
//	atari            CleanRL's stack: noop_reset=30, max_and_skip=4, episodic_life,
//	                 fire_reset if the action meanings hold FIRE, clip_reward,
//	                 resize=84, grayscale, frame_stack=4
//
// With env.WithEpisodeStatistics the statistics wrap the env inside the
// list, as CleanRL records them before any Atari wrapper: episode returns
// are the game's, unclipped and over all its lives.
//
// # Pixels
//
// Observations are float32 values standing for uint8 pixels (ALE's frames;
// a served env sends them one byte a value). resize and grayscale read each
// value as the uint8 it stands for and give OpenCV's results bit for bit
// (image_test.go compares with OpenCV 4.6 tables, testdata/gen.py): the
// area resize averages the source pixels each output pixel's footprint
// covers, weighted by the covered area, in OpenCV's float32 arithmetic,
// rounded half to even; integer ratios take OpenCV's integer path, whose
// 2×2 case rounds half up. Gray is OpenCV's 14-bit fixed-point
// 0.299 R + 0.587 G + 0.114 B. Only shrinking is an area resize (OpenCV
// enlarges bilinearly under the same flag): resize refuses to enlarge.
//
// # Where herd departs
//
//   - Layout: images are [H, W, C]. grayscale keeps a channel axis
//     ([H, W, 1]; Gymnasium drops it) and frame_stack stacks along it
//     ([H, W, K·C], oldest first; Gymnasium gives [K, H, W]): the
//     convolutional encoder's HWC → CHW transpose makes both the same
//     network input.
//   - noop_reset draws its count from its own stream, seeded by Reset's seed
//     (role "atari/noop_reset"; never seeded: seed 0), where SB3 draws from
//     the env's np_random, which a served env does not share.
//   - Lives come from Info.Lives (ALE's info["lives"]); a served env sends
//     them over gRPC, not over shared memory's step segment, so
//     episodic_life needs grpc:// for a served env. An env that reports no
//     lives makes episodic_life fail with an error.
//   - The atari preset needs the env's action meanings (ALE's
//     get_action_meanings(), sent by a served env): without them it fails,
//     naming the explicit list to write instead.
//
// As in SB3, max_and_skip leaves its buffer as the previous step left it
// when an episode ends before the last two frames, and fire_reset's reset
// info is empty.
//
// Cost: see BenchmarkAtariStack.
package atari
