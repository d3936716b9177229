package replaysvc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"herd/replay/persist"
)

// BenchmarkPush and BenchmarkSample: one call through the Go client to a
// hybrid store on loopback (Sample draws 32 records).
func BenchmarkPush(b *testing.B) {
	for _, vb := range []int{1 << 10, 43 << 10} {
		b.Run(fmt.Sprintf("value=%dB", vb), func(b *testing.B) {
			addr, stop, err := serveTemp(context.Background(), persist.Hybrid)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			c, err := Dial(addr, ClientOptions{Timeout: 30 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rec := []Record{{Value: make([]byte, vb)}}
			b.SetBytes(int64(vb))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec[0].Key = fmt.Sprint(i)
				if err := c.Push(context.Background(), rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSample(b *testing.B) {
	for _, vb := range []int{1 << 10, 43 << 10} {
		b.Run(fmt.Sprintf("value=%dB", vb), func(b *testing.B) {
			addr, stop, err := serveTemp(context.Background(), persist.Hybrid)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			c, err := Dial(addr, ClientOptions{Timeout: 30 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for i := range 256 {
				if err := c.Push(context.Background(), []Record{{Key: fmt.Sprint(i), Value: make([]byte, vb)}}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(32 * vb))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Sample(context.Background(), 32, "uniform"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBench runs the `herd bench remote replay` logic on a tiny budget.
func TestBench(t *testing.T) {
	rows, err := Bench(context.Background(), BenchConfig{Mode: persist.Memory, ValueBytes: []int{100}, Clients: []int{1, 3}, Ops: 30, SampleBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || rows[3].Op != "sample" || rows[3].Clients != 3 || !(rows[2].OpsPerS > 0) || rows[1].P99US < rows[1].P50US {
		t.Fatalf("rows %+v", rows)
	}
}
