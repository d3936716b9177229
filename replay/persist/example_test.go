package persist_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"

	"herd/replay/persist"
)

// ScoreOrder is a worked custom sampler: it declares a "score" field and
// returns keys in order of decreasing score (ties by key), ignoring the
// random stream. Its index is a sorted slice: O(N) insert and remove,
// O(n) sample — fine for an example, a skip list or B-tree would serve a
// large store.
//
// It does not implement encoding.BinaryMarshaler, so after a restore the
// Store rebuilds it by calling BuildIndex for every record.
type ScoreOrder struct {
	byScore []scored           // sorted: highest score first
	score   map[string]float64 // key → indexed score
}

type scored struct {
	s float64
	k string
}

func NewScoreOrder() *ScoreOrder { return &ScoreOrder{score: map[string]float64{}} }

func (o *ScoreOrder) Name() string     { return "score" }
func (o *ScoreOrder) Fields() []string { return []string{"score"} }
func (o *ScoreOrder) Len() int         { return len(o.byScore) }

func (o *ScoreOrder) Check(f map[string]float64) error {
	if _, ok := f["score"]; !ok {
		return fmt.Errorf("score sampler: record has no score field")
	}
	return nil
}

// pos finds where (s, k) sits in the order.
func (o *ScoreOrder) pos(s float64, k string) int {
	return sort.Search(len(o.byScore), func(i int) bool {
		e := o.byScore[i]
		return e.s < s || e.s == s && e.k >= k
	})
}

func (o *ScoreOrder) BuildIndex(key string, f map[string]float64) {
	o.RemoveIndex(key) // an upsert: drop the old position first
	s := f["score"]
	i := o.pos(s, key)
	o.byScore = append(o.byScore, scored{})
	copy(o.byScore[i+1:], o.byScore[i:])
	o.byScore[i] = scored{s, key}
	o.score[key] = s
}

func (o *ScoreOrder) RemoveIndex(key string) {
	s, ok := o.score[key]
	if !ok {
		return
	}
	i := o.pos(s, key)
	o.byScore = append(o.byScore[:i], o.byScore[i+1:]...)
	delete(o.score, key)
}

func (o *ScoreOrder) Sample(dst []string, n int, _ *rand.Rand) []string {
	dst = dst[:0]
	for i := 0; i < n && i < len(o.byScore); i++ {
		dst = append(dst, o.byScore[i].k)
	}
	return dst
}

// Example_customSampler plugs ScoreOrder into a memory store: the pending
// index means the draw sees the pushes at once, and the delete as well.
func Example_customSampler() {
	ctx := context.Background()
	s, err := persist.Open(ctx, persist.Options{Mode: persist.Memory,
		Samplers: []persist.Sampler{NewScoreOrder()}})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for i, score := range []float64{3, 9, 1, 7, 5} {
		key := fmt.Sprintf("ep%d", i)
		if err := s.Push(ctx, key, persist.Record{Value: []byte(key), Fields: map[string]float64{"score": score}}); err != nil {
			panic(err)
		}
	}
	if err := s.Delete(ctx, "ep3"); err != nil { // score 7
		panic(err)
	}
	items, err := s.Sample(nil, 3, "score")
	if err != nil {
		panic(err)
	}
	for _, it := range items {
		fmt.Println(it.Key, string(it.Value))
	}
	// Output:
	// ep1 ep1
	// ep4 ep4
	// ep0 ep0
}

// Example shows the driving loop: open a hybrid store, push, read back,
// sample, flush, close.
func Example() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()
	s, err := persist.Open(ctx, persist.Options{Mode: persist.Hybrid, Dir: dir, CacheMB: 64, Seed: 1,
		Samplers: []persist.Sampler{persist.NewPrioritized("per", "priority", 0.6)}})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 100; i++ {
		rec := persist.Record{Value: []byte(fmt.Sprintf("transition %d", i)),
			Fields: map[string]float64{"priority": float64(i % 10)}}
		if err := s.Push(ctx, fmt.Sprintf("t%03d", i), rec); err != nil {
			panic(err)
		}
	}
	v, _ := s.Get("t042") // visible at once, even if not yet applied
	fmt.Println(string(v))
	batch, _ := s.Sample(nil, 4, "per")
	fmt.Println(len(batch), s.Len())
	if err := s.Flush(ctx); err != nil { // durable in Pebble from here
		panic(err)
	}
	if err := s.Close(); err != nil {
		panic(err)
	}
	// Output:
	// transition 42
	// 4 100
}
