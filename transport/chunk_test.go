package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// contributionOf is member i's contribution to round r in the chunk
// tests: size bytes no other member or round has.
func contributionOf(i, r, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(r)))
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(rng.Uint32())
	}
	return b
}

func TestSplitChunksReassemble(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ size, limit, chunks int }{
		{100, 100, 1}, {101, 100, 2}, {1000, 100, 10}, {1001, 100, 11}, {7, 3, 3}, {5000, 4096, 2},
	} {
		b := contributionOf(0, c.size, c.size)
		parts, hs := splitChunks(b, c.limit)
		if len(parts) != c.chunks || (c.chunks == 1) != (hs == nil) {
			t.Fatalf("%d bytes under %d: %d chunks (headers %v), want %d", c.size, c.limit, len(parts), hs != nil, c.chunks)
		}
		if hs == nil {
			continue
		}
		var a *assembly
		var got []byte
		// In any order, each chunk twice, through the header's text.
		for _, k := range append(rng.Perm(len(parts)), rng.Perm(len(parts))...) {
			if len(parts[k]) > c.limit {
				t.Fatalf("chunk %d: %d bytes over the limit %d", k, len(parts[k]), c.limit)
			}
			h, err := parseChunk(hs[k].String())
			if err != nil {
				t.Fatal(err)
			}
			if a == nil {
				a = newAssembly(h)
			}
			whole, err := a.add(h, parts[k])
			if err != nil {
				t.Fatal(err)
			}
			if whole != nil {
				if got != nil {
					t.Fatal("the contribution completed twice")
				}
				got = whole
			}
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%d bytes in %d chunks: reassembled wrong", c.size, c.chunks)
		}
	}
}

func TestChunksThatDisagree(t *testing.T) {
	b := contributionOf(0, 0, 1000)
	parts, hs := splitChunks(b, 300) // 4 chunks of 250
	other, ohs := splitChunks(contributionOf(1, 0, 1000), 300)
	for name, f := range map[string]func(a *assembly) error{
		"another count": func(a *assembly) error {
			h := hs[1]
			h.n = 5
			_, err := a.add(h, parts[1])
			return err
		},
		"a short chunk": func(a *assembly) error { _, err := a.add(hs[1], parts[1][:10]); return err },
		"another contribution's chunk": func(a *assembly) error {
			_, err := a.add(ohs[1], other[1])
			return err
		},
		"corrupted bytes": func(a *assembly) error {
			bad := bytes.Clone(parts[3])
			bad[7] ^= 1
			for k := 1; k < 3; k++ {
				if _, err := a.add(hs[k], parts[k]); err != nil {
					return err
				}
			}
			_, err := a.add(hs[3], bad)
			return err
		},
	} {
		a := newAssembly(hs[0])
		if _, err := a.add(hs[0], parts[0]); err != nil {
			t.Fatal(err)
		}
		if err := f(a); !errors.Is(err, ErrChunk) {
			t.Errorf("%s: %v, want ErrChunk", name, err)
		}
	}
	for _, s := range []string{"", "1 2 3", "2 2 100 0", "0 1 100 0", "0 3 2 0", "a b c d", "0 2 100 99999999999"} {
		if _, err := parseChunk(s); !errors.Is(err, ErrChunk) {
			t.Errorf("header %q: %v, want ErrChunk", s, err)
		}
	}
}

// chunkGroup starts a NATS server taking messages of at most maxPayload
// bytes and joins M members to a group on it.
func chunkGroup(t *testing.T, maxPayload int32, M int, timeout time.Duration) []*natsCollective {
	t.Helper()
	srv, err := StartServer(ServerOptions{MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	run := runID(t)
	cs := make([]*natsCollective, M)
	for i := range M {
		c, err := natsTransport(t, srv.URL()).Collective(ctxT(t, 5*time.Second), run, Options{Learner: i, Learners: M, GatherTimeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c.(*natsCollective)
	}
	return cs
}

// chunkRounds runs rounds [0, rounds) on every member with contributions
// of size bytes and checks each member gets every one whole.
func chunkRounds(ctx context.Context, cs []*natsCollective, rounds, size int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() {
			for r := range rounds {
				out, err := c.AllGather(ctx, contributionOf(i, r, size))
				if err != nil {
					// A learner that fails leaves, so the others fail
					// at once too.
					errs[i] = err
					_ = c.Close()
					return
				}
				for j, b := range out {
					if !bytes.Equal(b, contributionOf(j, r, size)) {
						errs[i] = fmt.Errorf("member %d round %d: member %d's contribution of %d bytes differs", i, r, j, len(b))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestGatherChunksOverMaxPayload: contributions five times the server's
// max payload go out in chunks and arrive whole, also when a chunk is lost
// once (it is asked for and sent again).
func TestGatherChunksOverMaxPayload(t *testing.T) {
	const maxPayload, size, M, rounds = 8 << 10, 40 << 10, 3, 6
	cs := chunkGroup(t, maxPayload, M, 10*time.Second)
	var mu sync.Mutex
	dropped := 0
	cs[1].publishHook = func(round uint64, want bool, k int) bool {
		mu.Lock()
		defer mu.Unlock()
		if round == 3 && k == 2 && dropped == 0 {
			dropped++
			return true
		}
		return false
	}
	if err := chunkRounds(ctxT(t, 30*time.Second), cs, rounds, size); err != nil {
		t.Fatal(err)
	}
	per := uint64((size + maxPayload - gatherHeaderRoom - 1) / (maxPayload - gatherHeaderRoom))
	for i, c := range cs {
		s := c.GatherStats()
		if s.ChunksSent < per*rounds || s.ChunksReceived < per*rounds*(M-1) {
			t.Errorf("member %d: %+v, want at least %d chunks sent and %d received", i, s, per*rounds, per*rounds*(M-1))
		}
	}
	if dropped != 1 || cs[1].GatherStats().Resent == 0 {
		t.Errorf("dropped %d chunk(s), member 1 %+v: want one dropped and sent again", dropped, cs[1].GatherStats())
	}
}

// TestGatherChunkLostOrCorrupt: a chunk that never arrives fails the
// round at its deadline naming the chunk; a chunk that disagrees with the
// others fails it at once; neither hangs.
func TestGatherChunkLostOrCorrupt(t *testing.T) {
	const maxPayload, size = 8 << 10, 20 << 10
	t.Run("lost", func(t *testing.T) {
		const timeout = 1500 * time.Millisecond
		cs := chunkGroup(t, maxPayload, 2, timeout)
		cs[1].publishHook = func(round uint64, want bool, k int) bool { return round == 2 && k == 1 }
		start := time.Now()
		err := chunkRounds(ctxT(t, 30*time.Second), cs, 3, size)
		if !errors.Is(err, ErrGather) || !errors.Is(err, ErrChunk) || !strings.Contains(err.Error(), "learner 1's chunk(s) [1] of 3") {
			t.Fatalf("got %v, want ErrGather and ErrChunk naming learner 1's chunk 1 of 3", err)
		}
		if d := time.Since(start); d > timeout+5*time.Second {
			t.Errorf("the failure took %v", d)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		const timeout = time.Minute // far above what "at once" allows
		cs := chunkGroup(t, maxPayload, 2, timeout)
		// Member 1 sends round 1 a chunk of another contribution before
		// its own.
		cs[1].publishHook = func(round uint64, want bool, k int) bool {
			if round != 1 || k != 0 || want {
				return false
			}
			parts, hs := splitChunks(contributionOf(9, 9, size), maxPayload-gatherHeaderRoom)
			msg := &nats.Msg{Subject: cs[1].subj, Data: parts[1], Header: nats.Header{}}
			msg.Header.Set(gatherFrom, "1")
			msg.Header.Set(gatherRound, "1")
			msg.Header.Set(gatherSize, "2")
			msg.Header.Set(gatherChunk, hs[1].String())
			_ = cs[1].n.nc.PublishMsg(msg)
			return false
		}
		start := time.Now()
		err := chunkRounds(ctxT(t, 30*time.Second), cs, 2, size)
		if !errors.Is(err, ErrGather) || !errors.Is(err, ErrChunk) || !strings.Contains(err.Error(), "learner 1's contribution") {
			t.Fatalf("got %v, want ErrGather and ErrChunk naming learner 1's contribution", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the failure took %v", d)
		}
	})
}
