package persist

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"herd/replay/sumtree"
)

// slotTree maps keys to slots of a K-ary sum tree (herd/replay/sumtree) so
// that draws are proportional to a per-key weight. Freed slots get weight 0
// and are reused; the tree doubles when full.
type slotTree struct {
	tree    *sumtree.Tree
	slot    map[string]int
	keys    []string // slot → key; "" marks a free slot
	free    []int
	idx     []int // scratch for SampleTo
	updates int   // Sets since the last Rebuild
}

const slotTreeInitial = 1024

func newSlotTree() slotTree {
	t, err := sumtree.New(slotTreeInitial, 0)
	if err != nil {
		panic(err) // constant capacity: cannot fail
	}
	return slotTree{tree: t, slot: map[string]int{}}
}

func (s *slotTree) len() int { return len(s.slot) }

func (s *slotTree) set(key string, w float64) {
	i, ok := s.slot[key]
	if !ok {
		if n := len(s.free); n > 0 {
			i = s.free[n-1]
			s.free = s.free[:n-1]
			s.keys[i] = key
		} else {
			i = len(s.keys)
			if i == s.tree.Cap() {
				s.grow()
			}
			s.keys = append(s.keys, key)
		}
		s.slot[key] = i
	}
	s.tree.Set(i, w)
	s.touch()
}

func (s *slotTree) remove(key string) {
	i, ok := s.slot[key]
	if !ok {
		return
	}
	delete(s.slot, key)
	s.keys[i] = ""
	s.free = append(s.free, i)
	s.tree.Set(i, 0)
	s.touch()
}

// touch rebuilds the inner sums every few capacities of updates, as the
// sumtree docs advise, so float drift stays bounded.
func (s *slotTree) touch() {
	s.updates++
	if s.updates > 4*s.tree.Cap() {
		s.tree.Rebuild()
		s.updates = 0
	}
}

func (s *slotTree) grow() {
	t, err := sumtree.New(2*s.tree.Cap(), s.tree.Fanout())
	if err != nil {
		panic(fmt.Sprintf("persist: grow sum tree: %v", err))
	}
	for i := range s.keys {
		if w := s.tree.Get(i); w != 0 {
			t.Set(i, w)
		}
	}
	s.tree = t
}

func (s *slotTree) sample(dst []string, n int, r *rand.Rand) []string {
	dst = dst[:0]
	if len(s.slot) == 0 || !(s.tree.Total() > 0) {
		return dst
	}
	if cap(s.idx) < n {
		s.idx = make([]int, n)
	}
	idx := s.tree.SampleTo(s.idx[:n], r)
	for _, i := range idx {
		if i >= 0 && i < len(s.keys) && s.keys[i] != "" {
			dst = append(dst, s.keys[i])
		}
	}
	return dst
}

// marshal writes slot order and weights (uvarint slots, then per slot the
// key and its float64 weight), so a restored tree is identical.
func (s *slotTree) marshal(buf []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s.keys)))
	for i, k := range s.keys {
		buf = appendString(buf, k)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(s.tree.Get(i)))
	}
	return buf
}

func (s *slotTree) unmarshal(d *decoder) {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("slot count")
		return
	}
	c := slotTreeInitial
	for c < int(n) {
		c *= 2
	}
	t, err := sumtree.New(c, 0)
	if err != nil {
		d.fail("slot count")
		return
	}
	ns := slotTree{tree: t, slot: map[string]int{}, keys: make([]string, n)}
	for i := 0; i < int(n) && d.err == nil; i++ {
		k := d.string()
		w := math.Float64frombits(d.u64())
		if !(w >= 0 && w <= sumtree.MaxPriority) {
			d.fail("weight")
			return
		}
		ns.keys[i] = k
		if k == "" {
			if w != 0 {
				d.fail("weight of a free slot")
				return
			}
			ns.free = append(ns.free, i)
			continue
		}
		if _, dup := ns.slot[k]; dup {
			d.fail("repeated key")
			return
		}
		ns.slot[k] = i
		t.Set(i, w)
	}
	if d.err == nil {
		*s = ns
	}
}

// Prioritized samples key i with probability p_i^α / Σ_j p_j^α, where p_i
// is the record's declared priority field (Schaul et al., 2016, eq. 1), over
// every key in the store, cached or on disk: the priorities stay in memory
// in a K-ary sum tree (herd/replay/sumtree), so a draw costs O(log_K N) and
// no disk read; only fetching the sampled values may touch Pebble.
type Prioritized struct {
	name  string
	field string
	alpha float64
	t     slotTree
}

// NewPrioritized indexes the field named field (e.g. "priority") raised to
// alpha (0 gives uniform over keys with positive priority).
func NewPrioritized(name, field string, alpha float64) *Prioritized {
	return &Prioritized{name: name, field: field, alpha: alpha, t: newSlotTree()}
}

func (p *Prioritized) Name() string     { return p.name }
func (p *Prioritized) Fields() []string { return []string{p.field} }
func (p *Prioritized) Len() int         { return p.t.len() }

func (p *Prioritized) Check(f map[string]float64) error {
	v, ok := f[p.field]
	if !ok {
		return fmt.Errorf("persist: sampler %q: record has no %q field", p.name, p.field)
	}
	if !(v >= 0) || math.IsInf(v, 0) {
		return fmt.Errorf("persist: sampler %q: priority %v must be finite and >= 0", p.name, v)
	}
	if w := math.Pow(v, p.alpha); w > sumtree.MaxPriority {
		return fmt.Errorf("persist: sampler %q: priority %v to the power %v exceeds %g, the largest the sum tree holds",
			p.name, v, p.alpha, float64(sumtree.MaxPriority))
	}
	return nil
}

func (p *Prioritized) BuildIndex(key string, f map[string]float64) {
	p.t.set(key, math.Pow(f[p.field], p.alpha))
}

func (p *Prioritized) RemoveIndex(key string) { p.t.remove(key) }

func (p *Prioritized) Sample(dst []string, n int, r *rand.Rand) []string {
	return p.t.sample(dst, n, r)
}

// Weight returns the sum-tree weight of key (p^α) and whether it is indexed.
func (p *Prioritized) Weight(key string) (float64, bool) {
	i, ok := p.t.slot[key]
	if !ok {
		return 0, false
	}
	return p.t.tree.Get(i), true
}

func (p *Prioritized) MarshalBinary() ([]byte, error) { return p.t.marshal(nil), nil }

func (p *Prioritized) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	p.t.unmarshal(&d)
	if err := d.done(); err != nil {
		return fmt.Errorf("prioritized sampler %q: %w", p.name, err)
	}
	return nil
}

// PriorityTime favours recent records: key i is drawn with probability
// proportional to decay^(t_max - t_i), where t_i is the record's declared
// time field, or, if the record has none, its insertion count in this
// sampler. decay in (0, 1]; 1 is uniform, 0.999 halves the weight every
// 693 time units.
//
// Weights are stored as decay^(ref - t_i) against a reference time ref, so
// an insert touches one leaf; when new weights would exceed e^maxLogWeight
// the sampler moves ref forward and recomputes all weights (O(N), once
// every maxLogWeight/|ln decay| time units). Weights that underflow to 0
// (below about e^-103: the sum tree's leaves are float32) are never drawn:
// records that much less likely than the newest ones.
type PriorityTime struct {
	name  string
	field string
	decay float64
	lnD   float64
	ref   float64
	has   bool               // ref is set
	clock float64            // insertion counter, for records without the field
	times map[string]float64 // t_i per key, to recompute on rebase
	t     slotTree
}

// NewPriorityTime indexes the field named field (e.g. "time") with the
// given decay in (0, 1].
func NewPriorityTime(name, field string, decay float64) *PriorityTime {
	return &PriorityTime{name: name, field: field, decay: decay, lnD: math.Log(decay),
		times: map[string]float64{}, t: newSlotTree()}
}

func (p *PriorityTime) Name() string     { return p.name }
func (p *PriorityTime) Fields() []string { return []string{p.field} }
func (p *PriorityTime) Len() int         { return p.t.len() }

func (p *PriorityTime) Check(f map[string]float64) error {
	if !(p.decay > 0 && p.decay <= 1) {
		return fmt.Errorf("persist: sampler %q: decay %v not in (0, 1]", p.name, p.decay)
	}
	if v, ok := f[p.field]; ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
		return fmt.Errorf("persist: sampler %q: time %v must be finite", p.name, v)
	}
	return nil
}

func (p *PriorityTime) BuildIndex(key string, f map[string]float64) {
	p.clock++
	t, ok := f[p.field]
	if !ok {
		t = p.clock
	}
	if !p.has {
		p.ref, p.has = t, true
	}
	if (t-p.ref)*-p.lnD > maxLogWeight {
		p.rebase(t)
	}
	p.times[key] = t
	p.t.set(key, p.weight(t))
}

// maxLogWeight bounds the weights at e^80, below the float32 leaves'
// largest value e^88.7 (sumtree.MaxPriority).
const maxLogWeight = 80

func (p *PriorityTime) weight(t float64) float64 { return math.Exp((p.ref - t) * p.lnD) }

func (p *PriorityTime) rebase(ref float64) {
	p.ref = ref
	for k, t := range p.times {
		p.t.tree.Set(p.t.slot[k], p.weight(t))
	}
	p.t.tree.Rebuild()
}

func (p *PriorityTime) RemoveIndex(key string) {
	delete(p.times, key)
	p.t.remove(key)
}

func (p *PriorityTime) Sample(dst []string, n int, r *rand.Rand) []string {
	return p.t.sample(dst, n, r)
}

// MarshalBinary writes ref, clock and the has-ref flag, then the slot tree,
// then t_i per slot (kept exactly rather than recovered from the weights,
// which would lose precision).
func (p *PriorityTime) MarshalBinary() ([]byte, error) {
	buf := binary.LittleEndian.AppendUint64(nil, math.Float64bits(p.ref))
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(p.clock))
	if p.has {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	buf = p.t.marshal(buf)
	for _, k := range p.t.keys {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(p.times[k]))
	}
	return buf, nil
}

func (p *PriorityTime) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	ref := math.Float64frombits(d.u64())
	clock := math.Float64frombits(d.u64())
	if len(d.b) < 1 {
		d.fail("flag")
	}
	has := d.err == nil && d.b[0] == 1
	if d.err == nil {
		d.b = d.b[1:]
	}
	var t slotTree
	t.unmarshal(&d)
	times := map[string]float64{}
	if d.err == nil {
		for _, k := range t.keys {
			v := math.Float64frombits(d.u64())
			if k != "" {
				times[k] = v
			}
		}
	}
	if err := d.done(); err != nil {
		return fmt.Errorf("priority-time sampler %q: %w", p.name, err)
	}
	p.ref, p.clock, p.has, p.t, p.times = ref, clock, has, t, times
	return nil
}
