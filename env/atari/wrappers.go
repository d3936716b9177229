package atari

import (
	"fmt"
	"math/rand/v2"

	"herd/env/internal/core"
	"herd/internal/rng"
)

// base forwards everything a wrapper does not change.
type base struct{ inner core.Env }

func (b base) ObservationSpace() core.Space { return b.inner.ObservationSpace() }
func (b base) ActionSpace() core.Space      { return b.inner.ActionSpace() }
func (b base) Close() error                 { return b.inner.Close() }
func (b base) Unwrap() core.Env             { return b.inner }

// discreteAction is the encoded action of index k (action Start + k) of a
// Discrete action space with at least need actions; what names the wrapper
// in the error.
func discreteAction(e core.Env, k, need int, what string) ([]float32, error) {
	d, ok := e.ActionSpace().(core.Discrete)
	if !ok {
		return nil, fmt.Errorf("%w: %s needs a Discrete action space, got %v", core.ErrInvalidOption, what, e.ActionSpace())
	}
	if d.N < need {
		return nil, fmt.Errorf("%w: %s needs at least %d actions, got %v", core.ErrInvalidOption, what, need, d)
	}
	return []float32{float32(d.Start + k)}, nil
}

// NoopReset takes a random number of no-op steps (action index 0), drawn
// uniformly from 1…NoopMax, after each reset (SB3's NoopResetEnv, Gymnasium's
// AtariPreprocessing noop_max), resetting again with the same seed if an
// episode ends among them. The count comes from the wrapper's own stream,
// seeded by Reset's seed (rng stream "atari/noop_reset"; never seeded: seed
// 0), where SB3 draws from the inner env's np_random, which a remote env
// cannot share.
type NoopReset struct {
	base
	max  int
	noop []float32
	r    *rand.Rand
}

// NewNoopReset wraps e (Discrete actions) with noopMax ≥ 1.
func NewNoopReset(e core.Env, noopMax int) (*NoopReset, error) {
	if noopMax < 1 {
		return nil, fmt.Errorf("%w: noop_reset %d, want ≥ 1", core.ErrInvalidOption, noopMax)
	}
	noop, err := discreteAction(e, 0, 1, "noop_reset")
	if err != nil {
		return nil, err
	}
	return &NoopReset{base: base{e}, max: noopMax, noop: noop, r: rng.New(0, "atari/noop_reset", 0)}, nil
}

func (n *NoopReset) Reset(seed int64) ([]float32, core.Info, error) {
	if seed >= 0 {
		n.r = rng.New(uint64(seed), "atari/noop_reset", 0)
	}
	obs, info, err := n.inner.Reset(seed)
	if err != nil {
		return nil, info, err
	}
	for range 1 + n.r.IntN(n.max) {
		var term, trunc bool
		if obs, _, term, trunc, info, err = n.inner.Step(n.noop); err != nil {
			return nil, info, err
		}
		if term || trunc {
			if obs, info, err = n.inner.Reset(seed); err != nil {
				return nil, info, err
			}
		}
	}
	return obs, info, nil
}

func (n *NoopReset) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	return n.inner.Step(a)
}

// MaxAndSkip repeats each action Skip times, sums the rewards and returns
// the elementwise maximum of the last two observations (SB3's
// MaxAndSkipEnv): Atari sprites that flicker between frames stay visible.
// As in SB3, an episode that ends before the last two frames leaves the
// buffer as the previous step left it (zeros at first), so the observation
// of such a step is the previous step's maximum, refreshed only in the
// slots the short step reached.
type MaxAndSkip struct {
	base
	skip      int
	buf0, buf []float32
	out       []float32
}

// NewMaxAndSkip wraps e with skip ≥ 1.
func NewMaxAndSkip(e core.Env, skip int) (*MaxAndSkip, error) {
	if skip < 1 {
		return nil, fmt.Errorf("%w: max_and_skip %d, want ≥ 1", core.ErrInvalidOption, skip)
	}
	n := e.ObservationSpace().Dim()
	return &MaxAndSkip{base: base{e}, skip: skip, buf0: make([]float32, n), buf: make([]float32, n), out: make([]float32, n)}, nil
}

func (m *MaxAndSkip) Reset(seed int64) ([]float32, core.Info, error) { return m.inner.Reset(seed) }

func (m *MaxAndSkip) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	var (
		total       float64
		term, trunc bool
		info        core.Info
	)
	for i := range m.skip {
		obs, r, te, tr, inf, err := m.inner.Step(a)
		if err != nil {
			return nil, 0, false, false, inf, err
		}
		term, trunc, info = te, tr, inf
		switch i {
		case m.skip - 2:
			copy(m.buf0, obs)
		case m.skip - 1:
			copy(m.buf, obs)
		}
		total += r
		if te || tr {
			break
		}
	}
	for i, v := range m.buf0 {
		m.out[i] = max(v, m.buf[i])
	}
	return m.out, total, term, trunc, info, nil
}

// EpisodicLife ends an episode (terminated) when the agent loses a life,
// and resets the inner env only after a real game over; a reset after a
// lost life takes one no-op step instead (SB3's EpisodicLifeEnv, DQN's
// training protocol). It reads lives from Info.Lives (ALE's
// info["lives"]); an env that does not report them is an error.
type EpisodicLife struct {
	base
	noop     []float32
	lives    int
	realDone bool
	ended    bool
}

// NewEpisodicLife wraps e (Discrete actions; Info.HasLives).
func NewEpisodicLife(e core.Env) (*EpisodicLife, error) {
	noop, err := discreteAction(e, 0, 1, "episodic_life")
	if err != nil {
		return nil, err
	}
	return &EpisodicLife{base: base{e}, noop: noop, realDone: true}, nil
}

func livesOf(info core.Info) (int, error) {
	if !info.HasLives {
		return 0, fmt.Errorf("%w: episodic_life needs an env that reports lives (Info.Lives, ALE's info[\"lives\"])", core.ErrInvalidOption)
	}
	return info.Lives, nil
}

func (l *EpisodicLife) Reset(seed int64) ([]float32, core.Info, error) {
	var (
		obs  []float32
		info core.Info
		err  error
	)
	if l.realDone {
		obs, info, err = l.inner.Reset(seed)
	} else {
		var term, trunc bool
		obs, _, term, trunc, info, err = l.inner.Step(l.noop)
		if err == nil && (term || trunc) {
			obs, info, err = l.inner.Reset(seed)
		}
	}
	if err != nil {
		return nil, info, err
	}
	if l.lives, err = livesOf(info); err != nil {
		return nil, info, err
	}
	l.ended = false
	return obs, info, nil
}

func (l *EpisodicLife) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	if l.ended {
		return nil, 0, false, false, core.Info{}, fmt.Errorf("%w: episode (a life) ended", core.ErrNeedsReset)
	}
	obs, r, term, trunc, info, err := l.inner.Step(a)
	if err != nil {
		return obs, r, term, trunc, info, err
	}
	lives, err := livesOf(info)
	if err != nil {
		return nil, 0, false, false, info, err
	}
	l.realDone = term || trunc
	if 0 < lives && lives < l.lives {
		term = true
	}
	l.lives = lives
	l.ended = term || trunc
	return obs, r, term, trunc, info, nil
}

// FireReset presses FIRE (action index 1) and then action index 2 after
// each reset, resetting again if either ends the episode (SB3's
// FireResetEnv), for games that stand still until the player fires. As in
// SB3 the reset's info is empty, and the observation is that of the second
// step even when its episode ended and the env was reset after it.
type FireReset struct {
	base
	fire, two []float32
	keep      []float32
}

// NewFireReset wraps e (Discrete, at least 3 actions).
func NewFireReset(e core.Env) (*FireReset, error) {
	fire, err := discreteAction(e, 1, 3, "fire_reset")
	if err != nil {
		return nil, err
	}
	two, _ := discreteAction(e, 2, 3, "fire_reset")
	return &FireReset{base: base{e}, fire: fire, two: two}, nil
}

func (f *FireReset) Reset(seed int64) ([]float32, core.Info, error) {
	if _, _, err := f.inner.Reset(seed); err != nil {
		return nil, core.Info{}, err
	}
	_, _, term, trunc, _, err := f.inner.Step(f.fire)
	if err != nil {
		return nil, core.Info{}, err
	}
	if term || trunc {
		if _, _, err := f.inner.Reset(seed); err != nil {
			return nil, core.Info{}, err
		}
	}
	obs, _, term, trunc, _, err := f.inner.Step(f.two)
	if err != nil {
		return nil, core.Info{}, err
	}
	if term || trunc {
		// The inner env owns obs and may overwrite it on Reset.
		f.keep = append(f.keep[:0], obs...)
		obs = f.keep
		if _, _, err := f.inner.Reset(seed); err != nil {
			return nil, core.Info{}, err
		}
	}
	return obs, core.Info{}, nil
}

func (f *FireReset) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	return f.inner.Step(a)
}

// ClipReward replaces each reward by its sign, −1, 0 or +1 (SB3's
// ClipRewardEnv, np.sign; NaN stays NaN).
type ClipReward struct{ base }

// NewClipReward wraps e.
func NewClipReward(e core.Env) *ClipReward { return &ClipReward{base{e}} }

func (c *ClipReward) Reset(seed int64) ([]float32, core.Info, error) { return c.inner.Reset(seed) }

func (c *ClipReward) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	obs, r, term, trunc, info, err := c.inner.Step(a)
	switch {
	case r > 0:
		r = 1
	case r < 0:
		r = -1
	}
	return obs, r, term, trunc, info, err
}

// imageDims reads [H, W, C] from an image observation space.
func imageDims(s core.Space, what string) (h, w, c int, err error) {
	b, ok := s.(core.Box)
	if !ok || len(b.Dims) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: %s needs image observations (a Box of shape [height, width, channels]), got %v", core.ErrInvalidOption, what, s)
	}
	return b.Dims[0], b.Dims[1], b.Dims[2], nil
}

// byteBox is an image space of uint8 values, as Gymnasium declares the
// image wrappers' outputs: Box(0, 255, shape, uint8).
func byteBox(h, w, c int) core.Box {
	b := core.UniformBox(0, 255, h*w*c)
	b.Dims = []int{h, w, c}
	return b
}

// observe is the shared body of the wrappers that map each observation.
type observe struct {
	base
	space core.Box
	out   []float32
	f     func(dst, src []float32)
}

func (o *observe) ObservationSpace() core.Space { return o.space }

func (o *observe) Reset(seed int64) ([]float32, core.Info, error) {
	obs, info, err := o.inner.Reset(seed)
	if err != nil {
		return nil, info, err
	}
	o.f(o.out, obs)
	return o.out, info, nil
}

func (o *observe) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	obs, r, term, trunc, info, err := o.inner.Step(a)
	if err != nil {
		return nil, r, term, trunc, info, err
	}
	o.f(o.out, obs)
	return o.out, r, term, trunc, info, nil
}

// GrayScale converts RGB images [H, W, 3] to gray [H, W, 1] as Gymnasium's
// GrayScaleObservation (cv2.COLOR_RGB2GRAY, see Gray). Gymnasium drops the
// channel axis ([H, W]); herd keeps it so the result is still an image.
type GrayScale struct{ observe }

// NewGrayScale wraps e, whose observations must be [H, W, 3] images.
func NewGrayScale(e core.Env) (*GrayScale, error) {
	h, w, c, err := imageDims(e.ObservationSpace(), "grayscale")
	if err != nil {
		return nil, err
	}
	if c != 3 {
		return nil, fmt.Errorf("%w: grayscale needs RGB images (3 channels), got shape [%d %d %d]", core.ErrInvalidOption, h, w, c)
	}
	g := &GrayScale{observe{base: base{e}, space: byteBox(h, w, 1), out: make([]float32, h*w)}}
	g.f = func(dst, src []float32) {
		for i := range dst {
			dst[i] = float32(Gray(toByte(src[3*i]), toByte(src[3*i+1]), toByte(src[3*i+2])))
		}
	}
	return g, nil
}

// Resize shrinks images to [Height, Width, C] by area averaging, as
// Gymnasium's ResizeObservation (cv2.resize, INTER_AREA; see AreaResizer).
type Resize struct{ observe }

// NewResize wraps e, whose observations must be images at least oh × ow.
func NewResize(e core.Env, oh, ow int) (*Resize, error) {
	h, w, c, err := imageDims(e.ObservationSpace(), "resize")
	if err != nil {
		return nil, err
	}
	ar, err := NewAreaResizer(h, w, c, oh, ow)
	if err != nil {
		return nil, fmt.Errorf("%w: resize: %w", core.ErrInvalidOption, err)
	}
	return &Resize{observe{base: base{e}, space: byteBox(oh, ow, c), out: make([]float32, oh*ow*c), f: ar.Resize}}, nil
}

// FrameStack stacks the last K observations along the channel axis, the
// oldest first: [H, W, C] becomes [H, W, K·C], channel f·C + c holding
// channel c of frame f (Gymnasium's FrameStack gives [K, H, W] for gray
// frames; the conv encoder's HWC → CHW transpose makes herd's layout the
// same network input). Reset fills every slot with the first observation,
// as Gymnasium does.
type FrameStack struct {
	observe
	k, c   int
	frames [][]float32 // ring, frames[next] is the oldest
	next   int
}

// NewFrameStack wraps e (image observations) with k ≥ 1.
func NewFrameStack(e core.Env, k int) (*FrameStack, error) {
	if k < 1 {
		return nil, fmt.Errorf("%w: frame_stack %d, want ≥ 1", core.ErrInvalidOption, k)
	}
	h, w, c, err := imageDims(e.ObservationSpace(), "frame_stack")
	if err != nil {
		return nil, err
	}
	in := e.ObservationSpace().(core.Box)
	sp := core.Box{Low: make([]float32, 0, h*w*c*k), High: make([]float32, 0, h*w*c*k), Dims: []int{h, w, k * c}}
	for p := range h * w {
		for range k {
			sp.Low = append(sp.Low, in.Low[p*c:(p+1)*c]...)
			sp.High = append(sp.High, in.High[p*c:(p+1)*c]...)
		}
	}
	f := &FrameStack{observe: observe{base: base{e}, space: sp, out: make([]float32, h*w*c*k)}, k: k, c: c, frames: make([][]float32, k)}
	for i := range f.frames {
		f.frames[i] = make([]float32, h*w*c)
	}
	return f, nil
}

func (f *FrameStack) Reset(seed int64) ([]float32, core.Info, error) {
	obs, info, err := f.inner.Reset(seed)
	if err != nil {
		return nil, info, err
	}
	for _, fr := range f.frames {
		copy(fr, obs)
	}
	f.next = 0
	f.stack()
	return f.out, info, nil
}

func (f *FrameStack) Step(a []float32) ([]float32, float64, bool, bool, core.Info, error) {
	obs, r, term, trunc, info, err := f.inner.Step(a)
	if err != nil {
		return nil, r, term, trunc, info, err
	}
	copy(f.frames[f.next], obs)
	f.next = (f.next + 1) % f.k
	f.stack()
	return f.out, r, term, trunc, info, nil
}

func (f *FrameStack) stack() {
	c, kc := f.c, f.k*f.c
	for j := range f.k {
		fr := f.frames[(f.next+j)%f.k]
		for p := range len(fr) / c {
			copy(f.out[p*kc+j*c:p*kc+(j+1)*c], fr[p*c:(p+1)*c])
		}
	}
}
