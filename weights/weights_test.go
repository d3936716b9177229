package weights

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"herd/internal/rng"
	"herd/nn"
)

func testParams(t testing.TB) []*nn.Param {
	t.Helper()
	m, err := nn.NewMLP(nn.MLPConfig{In: 4, Hidden: []int{8}, Out: 2, Act: nn.Tanh}, rng.New(1, "weights/test", 0))
	if err != nil {
		t.Fatal(err)
	}
	return m.Params()
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	ps := testParams(t)
	v := New(7, ps)
	b, err := v.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b, ps)
	if err != nil {
		t.Fatal(err)
	}
	if got.N != 7 || got.Len() != len(ps) {
		t.Fatalf("decoded N=%d len=%d, want 7 and %d", got.N, got.Len(), len(ps))
	}
	dst := nn.CloneParams(ps)
	for _, p := range dst {
		clear(p.Value)
	}
	if err := got.CopyTo(dst); err != nil {
		t.Fatal(err)
	}
	for i, p := range dst {
		for j, x := range p.Value {
			if x != ps[i].Value[j] {
				t.Fatalf("%s[%d] = %v after round trip, want %v", p.Name, j, x, ps[i].Value[j])
			}
		}
	}
}

func TestVersionIsASnapshot(t *testing.T) {
	ps := testParams(t)
	v := New(1, ps)
	before := v.Param(0).Value[0]
	ps[0].Value[0] += 1
	if v.Param(0).Value[0] != before {
		t.Fatal("writing the live parameters changed a published version")
	}
}

func TestDecodeRejectsOtherModelAndBadBytes(t *testing.T) {
	ps := testParams(t)
	b, _ := New(1, ps).Encode()
	other, err := nn.NewMLP(nn.MLPConfig{In: 4, Hidden: []int{16}, Out: 2, Act: nn.Tanh}, rng.New(1, "weights/test", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b, other.Params()); !errors.Is(err, ErrMismatch) {
		t.Fatalf("decoding into another shape: %v, want ErrMismatch", err)
	}
	for _, bad := range [][]byte{nil, b[:7], b[:len(b)-1], append([]byte{}, b[8:]...)} {
		if _, err := Decode(bad, ps); err == nil {
			t.Fatalf("decoding %d bad bytes succeeded", len(bad))
		}
	}
	if err := New(1, ps).CopyTo(other.Params()); !errors.Is(err, ErrMismatch) {
		t.Fatalf("CopyTo another model: %v, want ErrMismatch", err)
	}
}

func TestStorePublishWait(t *testing.T) {
	ps := testParams(t)
	s := NewStore(New(0, ps))
	if err := s.Publish(New(0, ps)); !errors.Is(err, ErrStale) {
		t.Fatalf("publishing the same number: %v, want ErrStale", err)
	}
	done := make(chan *Version)
	go func() {
		v, err := s.Wait(context.Background(), 2)
		if err != nil {
			t.Error(err)
		}
		done <- v
	}()
	if err := s.Publish(New(1, ps)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("Wait(2) returned at version 1")
	case <-time.After(20 * time.Millisecond):
	}
	if err := s.Publish(New(2, ps)); err != nil {
		t.Fatal(err)
	}
	if v := <-done; v.N != 2 {
		t.Fatalf("Wait(2) returned version %d", v.N)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Wait(ctx, 99); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
}

// TestStoreNeverTorn publishes versions whose every value equals their
// number while readers check each version they see is whole.
func TestStoreNeverTorn(t *testing.T) {
	ps := testParams(t)
	fill := func(n uint64) {
		for _, p := range ps {
			for i := range p.Value {
				p.Value[i] = float32(n)
			}
		}
	}
	fill(0)
	s := NewStore(New(0, ps))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := uint64(0)
			for ctx.Err() == nil {
				v := s.Latest()
				if v.N < last {
					t.Errorf("version went back from %d to %d", last, v.N)
					return
				}
				last = v.N
				for i := range v.Len() {
					for _, x := range v.Param(i).Value {
						if x != float32(v.N) {
							t.Errorf("version %d holds %v: torn", v.N, x)
							return
						}
					}
				}
			}
		}()
	}
	for n := uint64(1); n <= 2000; n++ {
		fill(n)
		if err := s.Publish(New(n, ps)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

func FuzzDecode(f *testing.F) {
	ps := testParams(f)
	b, _ := New(3, ps).Encode()
	f.Add(b)
	f.Add([]byte{})
	f.Add(b[:16])
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data, ps)
		if err == nil && v.Len() != len(ps) {
			t.Fatalf("decoded %d tensors, want %d", v.Len(), len(ps))
		}
	})
}

func BenchmarkLatest(b *testing.B) {
	s := NewStore(New(0, testParams(b)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = s.Latest()
		}
	})
}

func BenchmarkNewVersion(b *testing.B) {
	ps := testParams(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = New(uint64(i), ps)
	}
}

// Hash is equal for equal parameters and changes with one bit of one value.
func TestHash(t *testing.T) {
	ps := testParams(t)
	a, b := New(1, ps), New(2, ps)
	if a.Hash() != b.Hash() {
		t.Fatal("equal parameters hash differently")
	}
	ps[len(ps)-1].Value[0] = math.Float32frombits(math.Float32bits(ps[len(ps)-1].Value[0]) ^ 1)
	if New(3, ps).Hash() == a.Hash() {
		t.Fatal("a changed bit does not change the hash")
	}
}
