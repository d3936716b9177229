package sample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// FormatVersion is the newest encoding's version. Encoders write the
// oldest format that holds the message: format 2, or format 3 for a
// segment with a recurrent state (Segment.State), so that a stateless
// segment is the same bytes in both. Decode reads formats 2 and 3 and
// refuses any other.
const FormatVersion = 3

// formatStateless is the format without segment states.
const formatStateless = 2

// Errors of this package.
var (
	// ErrCorrupt wraps every decoding failure.
	ErrCorrupt = errors.New("sample: corrupt encoding")
	// ErrVersion is returned for bytes of another FormatVersion.
	ErrVersion = errors.New("sample: unsupported format version")
	// ErrShape is returned when a value's slices do not match its dims.
	ErrShape = errors.New("sample: slice lengths do not match the dimensions")
)

// Episode is an episode that ended inside a sample.
type Episode struct {
	Return float64 // undiscounted return
	Length int     // steps
	At     int     // step index inside the sample at which it ended (t for a Segment, row for Transitions)
}

// Segment is on-policy experience: T steps × N envs, time-major.
type Segment struct {
	T, N, ObsDim, ActDim int
	// Version is the weight version that acted; Worker the env worker id.
	Version uint64
	Worker  int

	Obs      []float32 // T·N × ObsDim: the observation each action was taken on
	Actions  []float32 // T·N × ActDim: the sampled actions (unclipped; Discrete: the index)
	LogProbs []float32 // T·N: log π(a|s) of the behaviour policy
	Values   []float32 // T·N: V(s) of the behaviour policy
	Rewards  []float32 // T·N: r, plus γ·V(final obs) where a time limit cut the episode
	Dones    []float32 // T·N: 1 where the episode ended at this step

	NextObs    []float32 // N × ObsDim: the observations after the last step
	LastValues []float32 // N: V(NextObs)

	// Versions, when not empty, holds T weight versions: the one that
	// acted at each step (a policy worker may load newer weights inside a
	// segment, and several policy workers may hold different ones).
	// Version is then the oldest of them.
	Versions []uint64

	// State, for a recurrent policy, is each env's state when the segment
	// began (N rows of the policy's state width; zero for an env whose
	// episode ended just before): the learner re-runs env i's T steps from
	// row i, resetting the state after each step where Dones is 1. Empty
	// for a stateless policy.
	State []float32

	Episodes []Episode
}

// NewSegment allocates a segment of the given shape.
func NewSegment(T, n, obsDim, actDim int) *Segment {
	tn := T * n
	return &Segment{T: T, N: n, ObsDim: obsDim, ActDim: actDim,
		Obs: make([]float32, tn*obsDim), Actions: make([]float32, tn*actDim),
		LogProbs: make([]float32, tn), Values: make([]float32, tn), Rewards: make([]float32, tn),
		Dones: make([]float32, tn), NextObs: make([]float32, n*obsDim), LastValues: make([]float32, n)}
}

func (s *Segment) arrays() [][]float32 {
	return [][]float32{s.Obs, s.Actions, s.LogProbs, s.Values, s.Rewards, s.Dones, s.NextObs, s.LastValues}
}

func (s *Segment) lengths() ([]int, bool) {
	tn, ok := mul(s.T, s.N)
	o, ok2 := mul(tn, s.ObsDim)
	a, ok3 := mul(tn, s.ActDim)
	no, ok4 := mul(s.N, s.ObsDim)
	return []int{o, a, tn, tn, tn, tn, no, s.N}, ok && ok2 && ok3 && ok4
}

// Check reports whether every slice matches the dimensions.
func (s *Segment) Check() error {
	return checkArrays("segment", s.arrays, s.lengths, s.T, s.N, s.ObsDim, s.ActDim)
}

// Transitions is off-policy experience: N n-step transitions.
type Transitions struct {
	N, ObsDim, ActDim int
	// Version is the weight version that acted; Worker the env worker id.
	Version uint64
	Worker  int

	Obs       []float32 // N × ObsDim: s_t
	Actions   []float32 // N × ActDim: a_t as stored for learning (Discrete: the index)
	Rewards   []float32 // N: Σ_{k<m} γ^k r_{t+k}
	NextObs   []float32 // N × ObsDim: s_{t+m}, the true final observation where an episode ended
	Discounts []float32 // N: γ^m, the discount of the bootstrap from NextObs
	Dones     []float32 // N: 1 where the episode terminated (not truncated) within the m steps
	// Priorities are optional initial priorities (Ape-X): empty or N long.
	Priorities []float32

	Episodes []Episode
}

// NewTransitions allocates n transitions of the given shape, without
// priorities.
func NewTransitions(n, obsDim, actDim int) *Transitions {
	return &Transitions{N: n, ObsDim: obsDim, ActDim: actDim,
		Obs: make([]float32, n*obsDim), Actions: make([]float32, n*actDim), Rewards: make([]float32, n),
		NextObs: make([]float32, n*obsDim), Discounts: make([]float32, n), Dones: make([]float32, n)}
}

func (s *Transitions) arrays() [][]float32 {
	a := [][]float32{s.Obs, s.Actions, s.Rewards, s.NextObs, s.Discounts, s.Dones}
	if len(s.Priorities) > 0 {
		a = append(a, s.Priorities)
	}
	return a
}

func (s *Transitions) lengths() ([]int, bool) {
	o, ok := mul(s.N, s.ObsDim)
	a, ok2 := mul(s.N, s.ActDim)
	l := []int{o, a, s.N, o, s.N, s.N}
	if len(s.Priorities) > 0 {
		l = append(l, s.N)
	}
	return l, ok && ok2
}

// Check reports whether every slice matches the dimensions.
func (s *Transitions) Check() error {
	return checkArrays("transitions", s.arrays, s.lengths, s.N, s.ObsDim, s.ActDim)
}

func checkArrays(what string, arrays func() [][]float32, lengths func() ([]int, bool), dims ...int) error {
	for _, d := range dims {
		if d < 0 || d > math.MaxInt32 {
			return fmt.Errorf("%w: %s dims %v", ErrShape, what, dims)
		}
	}
	want, ok := lengths()
	if !ok {
		return fmt.Errorf("%w: %s dims %v overflow", ErrShape, what, dims)
	}
	for i, a := range arrays() {
		if len(a) != want[i] {
			return fmt.Errorf("%w: %s dims %v: array %d has %d values, want %d", ErrShape, what, dims, i, len(a), want[i])
		}
	}
	return nil
}

func mul(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a != 0 && b > math.MaxInt32/a {
		return 0, false
	}
	return a * b, true
}

const (
	kindSegment     = 1
	kindTransitions = 2
	headerSize      = 4 + 2 + 1 + 1 + 8 + 4 + 16
	episodeSize     = 16
)

var magic = [4]byte{'H', 'R', 'D', 'S'}

// AppendEncode appends the segment's encoding to dst.
func (s *Segment) AppendEncode(dst []byte) ([]byte, error) {
	if err := s.Check(); err != nil {
		return dst, err
	}
	arrays, flags := s.arrays(), uint8(0)
	if len(s.Versions) > 0 {
		if len(s.Versions) != s.T || slices.Min(s.Versions) != s.Version {
			return dst, fmt.Errorf("%w: segment has %d versions for %d steps, version %d is not their oldest", ErrShape, len(s.Versions), s.T, s.Version)
		}
		off := make([]float32, s.T)
		for t, v := range s.Versions {
			if v-s.Version > maxVersionStep {
				return dst, fmt.Errorf("%w: segment versions %d … %d span more than %d", ErrShape, s.Version, v, maxVersionStep)
			}
			off[t] = float32(v - s.Version)
		}
		arrays, flags = append(arrays, off), 1
	}
	width := 0
	if len(s.State) > 0 {
		if s.N == 0 || len(s.State)%s.N != 0 {
			return dst, fmt.Errorf("%w: segment of %d envs has %d state values, not a row per env", ErrShape, s.N, len(s.State))
		}
		width = len(s.State) / s.N
		arrays, flags = append(arrays, s.State), flags|flagState
	}
	return appendEncode(dst, kindSegment, flags, s.Version, s.Worker, [4]int{s.T, s.N, s.ObsDim, s.ActDim}, width, arrays, segmentObs, s.Episodes), nil
}

// flagState marks a segment with a recurrent state (format 3): the state
// width follows the header, and the state array comes last.
const flagState = 1 << 3

// segmentObs and transitionsObs are the indices of the observation arrays
// in arrays(), the ones encoded packed when their values allow it.
var (
	segmentObs     = []int{0, 6}
	transitionsObs = []int{0, 3}
)

// maxVersionStep bounds how far a segment's versions reach past its
// first: they travel as float32 offsets, exact up to 2²⁴.
const maxVersionStep = 1 << 24

// AppendEncode appends the transitions' encoding to dst.
func (s *Transitions) AppendEncode(dst []byte) ([]byte, error) {
	if err := s.Check(); err != nil {
		return dst, err
	}
	var flags uint8
	if len(s.Priorities) > 0 {
		flags = 1
	}
	return appendEncode(dst, kindTransitions, flags, s.Version, s.Worker, [4]int{s.N, s.ObsDim, s.ActDim, 0}, 0, s.arrays(), transitionsObs, s.Episodes), nil
}

// ObsEncoding is how observation values travel: float32, one byte per
// value (every value an integer in 0…255, as image pixels), or one bit per
// value (every value 0 or 1, as MinAtar's binary planes). EncodingOf picks
// the smallest that holds every value exactly (+0 only, no −0), so the
// receiver decodes the same bits. Samples carry it in their flags (bits
// 1–2); the transport's inference requests use the same rule.
type ObsEncoding uint8

const (
	ObsFloat32 ObsEncoding = 0
	ObsUint8   ObsEncoding = 1
	ObsBits    ObsEncoding = 2
)

// Observation encodings as flags bits.
const (
	obsUint8 = uint8(ObsUint8) << 1
	obsBits  = uint8(ObsBits) << 1
	obsMask  = obsUint8 | obsBits
)

// EncodingOf is the smallest observation encoding that holds every value
// of arrays exactly.
func EncodingOf(arrays ...[]float32) ObsEncoding {
	enc := ObsBits
	for _, a := range arrays {
		for _, v := range a {
			switch b := math.Float32bits(v); {
			case b == 0 || b == 0x3f800000: // +0, 1
			case b>>31 == 0 && v <= 255 && v == float32(uint8(v)):
				enc = ObsUint8
			default:
				return ObsFloat32
			}
		}
	}
	return enc
}

// obsEncoding is EncodingOf the arrays at indices obs, as flags bits.
func obsEncoding(arrays [][]float32, obs []int) uint8 {
	sel := make([][]float32, len(obs))
	for k, i := range obs {
		sel[k] = arrays[i]
	}
	return uint8(EncodingOf(sel...)) << 1
}

// ObsBytes is how many bytes n values take in encoding enc.
func ObsBytes(n int, enc ObsEncoding) int {
	switch enc {
	case ObsBits:
		return (n + 7) / 8
	case ObsUint8:
		return n
	}
	return 4 * n
}

// valueBytes is ObsBytes for flags bits enc (float32 for arrays other
// than observations).
func valueBytes(n int, enc uint8) int { return ObsBytes(n, ObsEncoding(enc>>1)) }

// AppendObs appends vals in encoding enc (float32 little-endian), which
// must hold them (EncodingOf): a value it cannot hold is written wrong.
func AppendObs(dst []byte, vals []float32, enc ObsEncoding) []byte {
	switch enc {
	case ObsUint8:
		for _, v := range vals {
			dst = append(dst, uint8(v))
		}
	case ObsBits:
		for j := 0; j < len(vals); j += 8 {
			var c uint8
			for k, v := range vals[j:min(j+8, len(vals))] {
				if v != 0 {
					c |= 1 << k
				}
			}
			dst = append(dst, c)
		}
	default:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return dst
}

// DecodeObs fills dst from b, which holds len(dst) values in encoding enc
// and must be exactly ObsBytes(len(dst), enc) long, with no bits set past
// the last value.
func DecodeObs(dst []float32, b []byte, enc ObsEncoding) error {
	if enc > ObsBits {
		return fmt.Errorf("%w: observation encoding %d", ErrCorrupt, enc)
	}
	n := len(dst)
	if len(b) != ObsBytes(n, enc) {
		return fmt.Errorf("%w: %d observation bytes for %d values in encoding %d, want %d", ErrCorrupt, len(b), n, enc, ObsBytes(n, enc))
	}
	switch enc {
	case ObsUint8:
		for j := range dst {
			dst[j] = float32(b[j])
		}
	case ObsBits:
		// A byte at a time from a table: a bit at a time made sampling a
		// packed replay 2–5x slower (replay's BenchmarkSampleMinAtar: a
		// batch of 32 MinAtar rows is 25,600 values), on every learner
		// step.
		full := n / 8
		for k, c := range b[:full] {
			*(*[8]float32)(dst[8*k : 8*k+8]) = bitFloats[c]
		}
		for j := 8 * full; j < n; j++ {
			dst[j] = float32(b[j/8] >> (j % 8) & 1)
		}
		if n%8 != 0 && b[n/8]>>(n%8) != 0 {
			return fmt.Errorf("%w: bits past the end of a packed observation array", ErrCorrupt)
		}
	default:
		for j := range dst {
			dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
		}
	}
	return nil
}

// bitFloats[c] is byte c's 8 bits, LSB first, as 0 and 1 (read-only).
var bitFloats = func() (t [256][8]float32) {
	for c := range t {
		for k := range t[c] {
			t[c][k] = float32(c >> k & 1)
		}
	}
	return t
}()

// appendEncode writes the message; width > 0 is a segment's state width
// (format 3), 0 for none (format 2).
func appendEncode(dst []byte, kind, flags uint8, version uint64, worker int, dims [4]int, width int, arrays [][]float32, obs []int, eps []Episode) []byte {
	enc := obsEncoding(arrays, obs)
	flags |= enc
	format := uint16(formatStateless)
	if width > 0 {
		format = FormatVersion
	}
	dst = append(dst, magic[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, format)
	dst = append(dst, kind, flags)
	dst = binary.LittleEndian.AppendUint64(dst, version)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(worker))
	for _, d := range dims {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
	}
	if width > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(width))
	}
	for i, a := range arrays {
		e := ObsFloat32
		if slices.Contains(obs, i) {
			e = ObsEncoding(enc >> 1)
		}
		dst = AppendObs(dst, a, e)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(eps)))
	for _, e := range eps {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(e.Return))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(e.Length))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(e.At))
	}
	return dst
}

// header is a decoded header.
type header struct {
	format      uint16
	kind, flags uint8
	version     uint64
	worker      int
	dims        [4]int
}

func readHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < headerSize {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, len(b), headerSize)
	}
	if [4]byte(b[:4]) != magic {
		return h, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:4])
	}
	h.format = binary.LittleEndian.Uint16(b[4:])
	if h.format != formatStateless && h.format != FormatVersion {
		return h, nil, fmt.Errorf("%w: format %d (this build reads %d and %d)", ErrVersion, h.format, formatStateless, FormatVersion)
	}
	h.kind, h.flags = b[6], b[7]
	h.version = binary.LittleEndian.Uint64(b[8:])
	h.worker = int(binary.LittleEndian.Uint32(b[16:]))
	for i := range h.dims {
		h.dims[i] = int(binary.LittleEndian.Uint32(b[20+4*i:]))
		if h.dims[i] > math.MaxInt32 {
			return h, nil, fmt.Errorf("%w: dimension %d out of range", ErrCorrupt, h.dims[i])
		}
	}
	return h, b[headerSize:], nil
}

// readBody fills arrays of the given lengths and the episodes from b, which
// must hold exactly that much; the arrays at indices obs are in
// observation encoding enc.
func readBody(b []byte, lengths []int, obs []int, enc uint8) ([][]float32, []Episode, error) {
	if enc == obsMask {
		return nil, nil, fmt.Errorf("%w: two observation encodings", ErrCorrupt)
	}
	encOf := func(i int) uint8 {
		if slices.Contains(obs, i) {
			return enc
		}
		return 0
	}
	total := 0
	for i, n := range lengths {
		if n > (math.MaxInt32-total)/4 {
			return nil, nil, fmt.Errorf("%w: arrays too large", ErrCorrupt)
		}
		total += valueBytes(n, encOf(i))
	}
	if len(b) < total+4 {
		return nil, nil, fmt.Errorf("%w: %d payload bytes, the header needs %d", ErrCorrupt, len(b), total+4)
	}
	arrays := make([][]float32, len(lengths))
	for i, n := range lengths {
		a := make([]float32, n)
		size := valueBytes(n, encOf(i))
		if err := DecodeObs(a, b[:size], ObsEncoding(encOf(i)>>1)); err != nil {
			return nil, nil, err
		}
		b = b[size:]
		arrays[i] = a
	}
	// One encoding per content, so bytes that decode re-encode to
	// themselves.
	if e := obsEncoding(arrays, obs); e != enc {
		return nil, nil, fmt.Errorf("%w: observations in encoding %#x, their values take %#x", ErrCorrupt, enc, e)
	}
	nEp := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	if nEp < 0 || len(b) != nEp*episodeSize {
		return nil, nil, fmt.Errorf("%w: %d episode bytes for %d episodes", ErrCorrupt, len(b), nEp)
	}
	var eps []Episode
	for k := range nEp {
		e := b[k*episodeSize:]
		eps = append(eps, Episode{Return: math.Float64frombits(binary.LittleEndian.Uint64(e)),
			Length: int(binary.LittleEndian.Uint32(e[8:])), At: int(binary.LittleEndian.Uint32(e[12:]))})
	}
	return arrays, eps, nil
}

// Kind reports what b holds: "segment", "transitions", or an error.
func Kind(b []byte) (string, error) {
	h, _, err := readHeader(b)
	if err != nil {
		return "", err
	}
	switch h.kind {
	case kindSegment:
		return "segment", nil
	case kindTransitions:
		return "transitions", nil
	}
	return "", fmt.Errorf("%w: unknown kind %d", ErrCorrupt, h.kind)
}

// DecodeSegment decodes bytes written by Segment.AppendEncode.
func DecodeSegment(b []byte) (*Segment, error) {
	h, body, err := readHeader(b)
	if err != nil {
		return nil, err
	}
	if h.kind != kindSegment {
		return nil, fmt.Errorf("%w: kind %d is not a segment", ErrCorrupt, h.kind)
	}
	if h.flags&^(1|obsMask|flagState) != 0 || (h.flags&flagState != 0) != (h.format == FormatVersion) {
		return nil, fmt.Errorf("%w: segment flags %#x in format %d", ErrCorrupt, h.flags, h.format)
	}
	s := &Segment{T: h.dims[0], N: h.dims[1], ObsDim: h.dims[2], ActDim: h.dims[3], Version: h.version, Worker: h.worker}
	lengths, ok := s.lengths()
	if !ok {
		return nil, fmt.Errorf("%w: segment dims %v overflow", ErrCorrupt, h.dims)
	}
	if h.flags&1 != 0 {
		lengths = append(lengths, s.T)
	}
	if h.flags&flagState != 0 {
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: no state width after the header", ErrCorrupt)
		}
		width := int(binary.LittleEndian.Uint32(body))
		n, ok := mul(s.N, width)
		if !ok || width < 1 || s.N < 1 {
			return nil, fmt.Errorf("%w: state of width %d for %d envs", ErrCorrupt, width, s.N)
		}
		lengths, body = append(lengths, n), body[4:]
	}
	a, eps, err := readBody(body, lengths, segmentObs, h.flags&obsMask)
	if err != nil {
		return nil, err
	}
	s.Obs, s.Actions, s.LogProbs, s.Values, s.Rewards, s.Dones, s.NextObs, s.LastValues = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
	if h.flags&flagState != 0 {
		s.State, a = a[len(a)-1], a[:len(a)-1]
	}
	if len(a) > 8 {
		s.Versions = make([]uint64, s.T)
		for t, d := range a[8] {
			if !(d >= 0 && d <= maxVersionStep) || d != float32(int32(d)) {
				return nil, fmt.Errorf("%w: segment version offset %v at step %d", ErrCorrupt, d, t)
			}
			s.Versions[t] = s.Version + uint64(d)
		}
		if s.T > 0 && slices.Min(s.Versions) != s.Version {
			return nil, fmt.Errorf("%w: segment's versions do not start at its version", ErrCorrupt)
		}
	}
	s.Episodes = eps
	return s, nil
}

// DecodeTransitions decodes bytes written by Transitions.AppendEncode.
func DecodeTransitions(b []byte) (*Transitions, error) {
	h, body, err := readHeader(b)
	if err != nil {
		return nil, err
	}
	if h.kind != kindTransitions {
		return nil, fmt.Errorf("%w: kind %d is not transitions", ErrCorrupt, h.kind)
	}
	if h.flags&^(1|obsMask) != 0 || h.dims[3] != 0 || (h.flags&1 == 1 && h.dims[0] == 0) || h.format != formatStateless {
		return nil, fmt.Errorf("%w: transitions flags %#x, dims %v, format %d", ErrCorrupt, h.flags, h.dims, h.format)
	}
	s := &Transitions{N: h.dims[0], ObsDim: h.dims[1], ActDim: h.dims[2], Version: h.version, Worker: h.worker}
	if h.flags&1 != 0 {
		s.Priorities = []float32{0} // marks presence for lengths; replaced below
	}
	lengths, ok := s.lengths()
	if !ok {
		return nil, fmt.Errorf("%w: transitions dims %v overflow", ErrCorrupt, h.dims)
	}
	a, eps, err := readBody(body, lengths, transitionsObs, h.flags&obsMask)
	if err != nil {
		return nil, err
	}
	s.Obs, s.Actions, s.Rewards, s.NextObs, s.Discounts, s.Dones = a[0], a[1], a[2], a[3], a[4], a[5]
	s.Priorities = nil
	if len(a) > 6 {
		s.Priorities = a[6]
	}
	s.Episodes = eps
	return s, nil
}
