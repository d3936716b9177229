package flow

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// toy is a source actor's state: it counts the items it made and stamps
// each with the weight version it holds, as a rollout worker does.
type toy struct {
	id, made, limit int
	version         uint64
	produced        *atomic.Int64 // shared count of items made by every shard
	delay           time.Duration
}

type toyItem struct {
	shard, seq int
	version    uint64
}

func toyPar(t *testing.T, ctx context.Context, n, limit int, produced *atomic.Int64) (ParIter[toyItem], []*toy) {
	t.Helper()
	shards := make([]Shard[toyItem], n)
	toys := make([]*toy, n)
	for k := range n {
		a := NewActor()
		t.Cleanup(a.Close)
		s := &toy{id: k, limit: limit, produced: produced}
		toys[k] = s
		shards[k] = Shard[toyItem]{Actor: a, Next: func() (toyItem, error) {
			if s.limit > 0 && s.made >= s.limit {
				return toyItem{}, ErrEnd
			}
			time.Sleep(s.delay)
			s.made++
			if s.produced != nil {
				s.produced.Add(1)
			}
			return toyItem{shard: s.id, seq: s.made, version: s.version}, nil
		}}
	}
	return NewParIter(ctx, shards), toys
}

// TestLazy: building a plan runs nothing; pulling k rounds of GatherSync
// asks every shard for exactly k items.
func TestLazy(t *testing.T) {
	var produced atomic.Int64
	par, toys := toyPar(t, context.Background(), 3, 0, &produced)
	it := ForEach(GatherSync(ParForEach(par, func(x toyItem) (toyItem, error) { return x, nil })),
		func(r []toyItem) (int, error) { return len(r), nil })
	time.Sleep(10 * time.Millisecond)
	if n := produced.Load(); n != 0 {
		t.Fatalf("building the plan produced %d items", n)
	}
	k := 0
	for n, err := range it {
		if err != nil || n != 3 {
			t.Fatalf("round %d: %d items, %v", k, n, err)
		}
		if k++; k == 4 {
			break
		}
	}
	for _, s := range toys {
		if err := callOn(par, s.id, func() {}); err != nil {
			t.Fatal(err)
		}
		if s.made != 4 {
			t.Errorf("shard %d made %d items after 4 rounds", s.id, s.made)
		}
	}
}

func callOn[T any](p ParIter[T], k int, f func()) error {
	return p.Actor(k).Call(context.Background(), func() error { f(); return nil })
}

// TestGatherSyncBarrier: after a round of GatherSync and a weight broadcast
// (a message to every shard's actor), every shard's next item was produced
// with the new version (RLlib Flow §4: actors are halted between fetches).
func TestGatherSyncBarrier(t *testing.T) {
	par, toys := toyPar(t, context.Background(), 4, 20, nil)
	for k := range toys {
		toys[k].delay = time.Duration(k) * 100 * time.Microsecond // uneven shards
	}
	var v uint64
	rounds := 0
	for round, err := range GatherSync(par) {
		if err != nil {
			t.Fatal(err)
		}
		for k, x := range round {
			if x.shard != k || x.version != v {
				t.Fatalf("round %d: item %d from shard %d version %d, want shard %d version %d", rounds, k, x.shard, x.version, k, v)
			}
		}
		// UpdateWeights: the broadcast is a message, not awaited.
		v++
		for k, s := range toys {
			nv := v
			par.Actor(k).Send(func() { s.version = nv })
		}
		rounds++
	}
	if rounds != 20 {
		t.Errorf("%d rounds, want 20 (every shard's limit)", rounds)
	}
}

// TestGatherSyncAheadLag: with numAsync rounds in flight, round r's
// items carry the version broadcast after round r − numAsync (0 before),
// whatever the shards' timing, and a slow consumer never leaves more than
// numAsync rounds produced and not taken.
func TestGatherSyncAheadLag(t *testing.T) {
	for _, numAsync := range []int{1, 2, 3} {
		var produced atomic.Int64
		par, toys := toyPar(t, context.Background(), 3, 12, &produced)
		for k := range toys {
			toys[k].delay = time.Duration(k) * 200 * time.Microsecond // uneven shards
		}
		rounds := 0
		for round, err := range GatherSyncAhead(par, numAsync) {
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(max(0, rounds-numAsync+1))
			for k, x := range round {
				if x.shard != k || x.seq != rounds+1 || x.version != want {
					t.Fatalf("numAsync %d, round %d: item %d is shard %d item %d version %d, want shard %d item %d version %d",
						numAsync, rounds, k, x.shard, x.seq, x.version, k, rounds+1, want)
				}
			}
			time.Sleep(time.Millisecond) // a slow consumer: the shards run ahead
			if n, most := produced.Load(), int64(3*(rounds+numAsync)); n > most {
				t.Fatalf("numAsync %d, round %d: %d items produced, at most %d may be", numAsync, rounds, n, most)
			}
			rounds++
			for k, s := range toys {
				v := uint64(rounds)
				par.Actor(k).Send(func() { s.version = v })
			}
		}
		if rounds != 12 {
			t.Errorf("numAsync %d: %d rounds, want 12", numAsync, rounds)
		}
	}
	for _, e := range GatherSyncAhead(toyParNoT(t), 0) {
		if e == nil {
			t.Fatal("numAsync 0 accepted")
		}
	}
}

func toyParNoT(t *testing.T) ParIter[toyItem] {
	par, _ := toyPar(t, context.Background(), 1, 1, nil)
	return par
}

// TestGatherSyncUneven: shards that end in different rounds are an error,
// not a silently short round.
func TestGatherSyncUneven(t *testing.T) {
	par, toys := toyPar(t, context.Background(), 2, 3, nil)
	toys[1].limit = 2
	var err error
	for _, e := range GatherSync(par) {
		err = e
	}
	if !errors.Is(err, ErrUneven) {
		t.Fatalf("got %v, want ErrUneven", err)
	}
}

// TestGatherAsyncBound: a slow consumer never leaves more than numAsync
// items per shard produced and not taken, and every item is yielded once.
func TestGatherAsyncBound(t *testing.T) {
	for _, numAsync := range []int{1, 2, 3} {
		var produced atomic.Int64
		par, _ := toyPar(t, context.Background(), 3, 10, &produced)
		var taken int64
		var maxHeld int64
		seen := map[[2]int]bool{}
		for x, err := range GatherAsync(par, numAsync) {
			if err != nil {
				t.Fatal(err)
			}
			taken++
			time.Sleep(2 * time.Millisecond) // slow consumer: the shards are fast
			maxHeld = max(maxHeld, produced.Load()-taken)
			if seen[[2]int{x.shard, x.seq}] {
				t.Fatalf("item %v yielded twice", x)
			}
			seen[[2]int{x.shard, x.seq}] = true
		}
		if taken != 30 {
			t.Errorf("numAsync %d: %d items, want 30", numAsync, taken)
		}
		// Never past the bound; and the shards did run ahead of the slow
		// consumer (so the bound was exercised), whatever the machine's load.
		if bound := int64(numAsync * 3); maxHeld > bound || maxHeld < int64(numAsync) {
			t.Errorf("numAsync %d: held up to %d items, bound %d", numAsync, maxHeld, bound)
		}
	}
}

// TestGatherAsyncMessageOrder: a message sent to shard k after one of its
// items was yielded reaches every item of k requested after it; with
// numAsync 1 that is k's very next item.
func TestGatherAsyncMessageOrder(t *testing.T) {
	par, toys := toyPar(t, context.Background(), 3, 15, nil)
	last := make([]uint64, 3)
	var v uint64
	for x, err := range GatherAsync(par, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if x.version != last[x.shard] {
			t.Fatalf("shard %d item %d has version %d, was sent %d", x.shard, x.seq, x.version, last[x.shard])
		}
		v++
		nv, s := v, toys[x.shard]
		last[x.shard] = nv
		par.Actor(x.shard).Send(func() { s.version = nv })
	}
}

// TestSplitBound: with a fast and a slow consumer, no copy ever buffers
// more than the bound, both see every item in order, and the fast one is
// held back (the lagging consumer is preferred).
func TestSplitBound(t *testing.T) {
	const n, bound = 200, 4
	src := make([]int, n)
	for i := range src {
		src[i] = i
	}
	var pulled atomic.Int64
	it := ForEach(FromSlice(src), func(x int) (int, error) { pulled.Add(1); return x, nil })
	s, copies := split(it, 2, bound)
	var wg sync.WaitGroup
	got := make([][]int, 2)
	var slowTaken atomic.Int64
	var maxLead int64
	for i, c := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x, err := range c {
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = append(got[i], x)
				if i == 1 {
					slowTaken.Add(1)
					time.Sleep(50 * time.Microsecond)
				} else if lead := pulled.Load() - slowTaken.Load(); lead > maxLead {
					maxLead = lead
				}
			}
		}()
	}
	wg.Wait()
	for i := range got {
		if !slices.Equal(got[i], src) {
			t.Fatalf("copy %d saw %d items, not the source in order", i, len(got[i]))
		}
	}
	if s.maxHeld > bound {
		t.Errorf("a copy buffered %d items, bound %d", s.maxHeld, bound)
	}
	if maxLead > bound+1 {
		t.Errorf("the fast copy ran %d items ahead of the slow one, bound %d", maxLead, bound)
	}
}

// TestSplitStoppedCopy: a copy that stops does not hold the other back.
func TestSplitStoppedCopy(t *testing.T) {
	src := make([]int, 100)
	copies := Split(FromSlice(src), 2, 2)
	for range copies[1] {
		break
	}
	n := 0
	for range copies[0] {
		n++
	}
	if n != 100 {
		t.Fatalf("the remaining copy saw %d items, want 100", n)
	}
}

// TestUnionRoundRobinAndWeighted: fixed interleavings, inputs that end are
// skipped.
func TestUnionRoundRobinAndWeighted(t *testing.T) {
	a, b := FromSlice([]string{"a1", "a2", "a3"}), FromSlice([]string{"b1"})
	var got []string
	for x, err := range UnionRoundRobin(a, b) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if want := []string{"a1", "b1", "a2", "a3"}; !slices.Equal(got, want) {
		t.Errorf("round robin %v, want %v", got, want)
	}
	store := FromSlice([]string{"s1", "s2", "s3"})
	replay := FromSlice([]string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"})
	got = got[:0]
	for x, err := range UnionWeighted([]int{1, 3}, store, replay) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if want := []string{"s1", "r1", "r2", "r3", "s2", "r4", "r5", "r6", "s3", "r7"}; !slices.Equal(got, want) {
		t.Errorf("weighted %v, want %v", got, want)
	}
	for _, err := range UnionWeighted([]int{0}, store) {
		if err == nil {
			t.Error("weight 0 accepted")
		}
	}
}

// TestUnionAsync: every item of every input arrives once, and an error
// ends the union.
func TestUnionAsync(t *testing.T) {
	a, b := FromSlice([]int{1, 2, 3}), FromSlice([]int{10, 20})
	var got []int
	for x, err := range UnionAsync(a, b) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	slices.Sort(got)
	if want := []int{1, 2, 3, 10, 20}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	boom := errors.New("boom")
	bad := ForEach(FromSlice([]int{1, 2}), func(x int) (int, error) {
		if x == 2 {
			return 0, boom
		}
		return x, nil
	})
	var last error
	for _, err := range UnionAsync(bad, FromSlice([]int{5})) {
		last = err
	}
	if !errors.Is(last, boom) {
		t.Errorf("last error %v, want boom", last)
	}
	// Stopping early waits for the input goroutines (no leak).
	for range UnionAsync(FromSlice(make([]int, 100)), FromSlice(make([]int, 100))) {
		break
	}
}

// TestSelectCombineFlatten covers the sequential operators.
func TestSelectCombineFlatten(t *testing.T) {
	type exp struct {
		policy string
		n      int
	}
	xs := FromSlice([]exp{{"a", 2}, {"b", 1}, {"a", 3}, {"b", 5}, {"a", 1}})
	var got []exp
	for x, err := range Select(xs, func(e exp) string { return e.policy }, "a") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if len(got) != 3 || got[1].n != 3 {
		t.Fatalf("select a: %v", got)
	}
	var sizes []int
	for b, err := range Combine(xs, 4, func(e exp) int { return e.n }) {
		if err != nil {
			t.Fatal(err)
		}
		s := 0
		for _, e := range b {
			s += e.n
		}
		sizes = append(sizes, s)
	}
	if want := []int{6, 5, 1}; !slices.Equal(sizes, want) {
		t.Errorf("combine sizes %v, want %v (the last, short batch is kept)", sizes, want)
	}
	var flat []int
	for x, err := range Flatten(FromSlice([][]int{{1, 2}, {}, {3}})) {
		if err != nil {
			t.Fatal(err)
		}
		flat = append(flat, x)
	}
	if !slices.Equal(flat, []int{1, 2, 3}) {
		t.Errorf("flatten %v", flat)
	}
}

// TestCancel: a cancelled context ends a gather that waits on a stuck
// shard with the context's error.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	par, toys := toyPar(t, ctx, 2, 0, nil)
	toys[1].delay = 300 * time.Millisecond
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	var last error
	for _, err := range GatherSync(par) {
		last = err
	}
	if !errors.Is(last, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", last)
	}
}

// TestGatherAsyncLag: with the consumer broadcasting a new version after
// every item (IMPALA's TrainOneStep), no item is yielded more than maxLag
// versions behind, even when one shard is far slower than the others:
// shard 0's first item waits until the other shards have made more items
// than the bound lets the consumer take meanwhile (or a second passes),
// which unbounded arrival order would let them. Every item comes once.
func TestGatherAsyncLag(t *testing.T) {
	const n, numAsync, limit = 3, 2, 20
	for _, maxLag := range []int{0, 8} {
		bound := maxLag
		if bound == 0 {
			bound = n*numAsync - 1
		}
		var others atomic.Int64
		gate := int64((n-1)*numAsync + bound + 1)
		shards := make([]Shard[toyItem], n)
		toys := make([]*toy, n)
		for k := range n {
			a := NewActor()
			t.Cleanup(a.Close)
			s := &toy{id: k}
			toys[k] = s
			shards[k] = Shard[toyItem]{Actor: a, Next: func() (toyItem, error) {
				if s.made >= limit {
					return toyItem{}, ErrEnd
				}
				if k == 0 && s.made == 0 {
					for deadline := time.Now().Add(time.Second); others.Load() < gate && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
				}
				s.made++
				if k != 0 {
					others.Add(1)
				}
				return toyItem{shard: k, seq: s.made, version: s.version}, nil
			}}
		}
		par := NewParIter(context.Background(), shards)
		var v uint64
		maxSeen := 0
		seen := map[[2]int]bool{}
		gathered, err := GatherAsyncLag(par, numAsync, maxLag)
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range gathered {
			if err != nil {
				t.Fatal(err)
			}
			if seen[[2]int{x.shard, x.seq}] {
				t.Fatalf("item %v yielded twice", x)
			}
			seen[[2]int{x.shard, x.seq}] = true
			maxSeen = max(maxSeen, int(v-x.version))
			v++
			for k, s := range toys {
				nv := v
				par.Actor(k).Send(func() { s.version = nv })
			}
		}
		if len(seen) != n*limit {
			t.Errorf("max lag %d: %d items, want %d", maxLag, len(seen), n*limit)
		}
		if maxSeen > bound {
			t.Errorf("max lag %d: an item came %d versions behind, bound %d", maxLag, maxSeen, bound)
		}
	}
	// Below the lag of the first requests, the bound cannot hold.
	par, _ := toyPar(t, context.Background(), n, 1, nil)
	if _, err := GatherAsyncLag(par, numAsync, n*numAsync-2); !errors.Is(err, ErrConfig) {
		t.Errorf("max lag %d with %d first requests: %v, want a config error", n*numAsync-2, n*numAsync, err)
	}
}
