package sumtree

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzOps decodes the input as a capacity, a fanout and a sequence of
// operations (set, batched set, split set, rebuild, search) and checks
// every search against the naive reference after each step. The seed
// corpus runs as a normal test; `go test -fuzz FuzzOps` explores further.
func FuzzOps(f *testing.F) {
	f.Add([]byte{10, 1, 0, 3, 0, 0, 0x40, 1, 2, 4, 0, 0, 0x3f, 4, 7, 9})
	f.Add([]byte{200, 4, 1, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 0xff, 0xff})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		n := 1 + int(data[0])
		k := 2 << (data[1] % 6)
		tr, err := New(n, k)
		if err != nil {
			t.Fatal(err)
		}
		ref := make(naive, n)
		data = data[2:]
		next := func() (byte, bool) {
			if len(data) == 0 {
				return 0, false
			}
			b := data[0]
			data = data[1:]
			return b, true
		}
		prio := func() float64 {
			if len(data) < 2 {
				return 0
			}
			v := binary.LittleEndian.Uint16(data)
			data = data[2:]
			// Exponent-spread priorities: 0, tiny, huge.
			return float64(v&0xff) * math.Ldexp(1, int(v>>8)%60-30)
		}
		for steps := 0; steps < 64; steps++ {
			op, ok := next()
			if !ok {
				break
			}
			switch op % 5 {
			case 0:
				i, _ := next()
				p := prio()
				tr.Set(int(i)%n, p)
				ref[int(i)%n] = stored(p)
			case 1, 2:
				m, _ := next()
				idx := make([]int, int(m%8)+1)
				ps := make([]float64, len(idx))
				for b := range idx {
					i, _ := next()
					idx[b], ps[b] = int(i)%n, prio()
					ref[idx[b]] = stored(ps[b])
				}
				if op%5 == 1 {
					tr.SetBatch(idx, ps)
				} else {
					tr.Propagate(idx, tr.SetLeaves(nil, idx, ps))
				}
			case 3:
				tr.Rebuild()
			case 4:
				x, _ := next()
				total := tr.Total()
				if total <= 0 {
					continue
				}
				target := total * float64(x) / 256
				i := tr.FindTo([]int{0}, []float64{target})[0]
				if ref.total() == 0 {
					continue // only rounding residue left: any answer is -1 or positive
				}
				if i < 0 || i >= n || ref[i] <= 0 {
					t.Fatalf("FindTo(%v) = %d: outside or zero priority", target, i)
				}
			}
			for i, v := range ref {
				if tr.Get(i) != v {
					t.Fatalf("Get(%d) = %v, want %v", i, tr.Get(i), v)
				}
			}
			if d := math.Abs(tr.Total() - ref.total()); d > 1e-9*math.Max(1, ref.total()) && d > math.Ldexp(1, 40-52) {
				t.Fatalf("Total %v, sum %v", tr.Total(), ref.total())
			}
		}
	})
}
