// Package sample defines the two forms in which experience travels from env
// workers to learners, and their wire encoding.
//
// # Formats
//
// Segment is on-policy experience: T steps of N envs, in time-major order
// (row t·N+i is env i at step t), with what the behaviour policy computed
// when it acted (log-probabilities, values) and what GAE needs to finish the
// segment (NextObs and LastValues, the bootstrap after the last step). The
// truncation bootstrap is folded into Rewards by the env worker: where an
// episode was cut by a time limit, Rewards holds r + γ·V(final observation),
// so learners never see final observations. PPO and A2C learn from it.
//
// Transitions is off-policy experience, already assembled into n-step
// transitions by the env worker (it owns the per-env history): reward sums,
// the discount γ^m of the bootstrap and whether the episode terminated
// inside the n steps. Optional initial priorities (Ape-X) ride along. DQN,
// SAC, TD3 and DDPG store them in replay.
//
// Both carry the weight version that acted, the env worker that produced
// them, and the episodes that ended inside them (for metrics at the learner).
//
// # Encoding
//
// A documented flat little-endian layout rather than protobuf: the payload is
// a handful of float32 arrays whose lengths follow from four header numbers,
// so decoding is one bounds check and a copy per array, with no per-element
// tags and no intermediate message objects (a 128×4 CartPole segment is
// 13 kB either way, but protobuf's generated decoder allocates per field and
// checks per element). Transports that need an envelope (NATS, gRPC) carry
// these bytes in a bytes field of their own versioned message. Layout, all
// little-endian:
//
//	magic   "HRDS"           4 bytes
//	format  uint16           2, or 3 for a Segment with a recurrent
//	                         state; any other is refused
//	kind    uint8            1 = Segment, 2 = Transitions
//	flags   uint8            Transitions: bit 0 = priorities present;
//	                         Segment: bit 0 = per-step versions present;
//	                         both: bit 1 = observations one byte per value,
//	                         bit 2 = one bit per value (see below);
//	                         Segment: bit 3 = state present (format 3)
//	version uint64           weight version that acted
//	worker  uint32           env worker id
//	dims    4 × uint32       Segment: T, N, ObsDim, ActDim; Transitions: N, ObsDim, ActDim, 0
//	width   uint32           format 3 only: the state's values per env (≥ 1)
//	arrays  float32 …        in field order (see Segment and Transitions);
//	                         a Segment's per-step versions next, as T
//	                         offsets from version (exact integers < 2²⁴),
//	                         then its state (N × width, format 3);
//	                         the observation arrays (Obs, NextObs) packed
//	                         when flags say so: uint8 each, or bits
//	                         LSB-first, ⌈n/8⌉ bytes per array
//	nEp     uint32           episodes that ended inside
//	episode nEp × 16 bytes   return float64, length uint32, at uint32
//
// Observations travel in the smallest encoding that holds every value of
// the message exactly: bits when all are 0 or 1 (MinAtar's binary planes:
// 400 values in 50 bytes instead of 1 600), bytes when all are integers
// 0…255 (8-bit pixels), float32 otherwise. The encoder decides per
// message by looking at the values, so what a learner decodes is what the
// env worker recorded, bit for bit, and no env declares anything.
// EncodingOf, AppendObs and DecodeObs are that rule on their own: the
// transport's inference requests use them too.
//
// Decode checks that the input's length is exactly what the header implies
// before allocating anything, so bad bytes cost an error, never a panic or an
// allocation larger than the input.
package sample
