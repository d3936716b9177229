package transport

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	herdv1 "herd/proto/herd/v1"
	"herd/sample"
)

// The wire's observation encodings are package sample's, value for value.
func TestObsEncodingValues(t *testing.T) {
	for enc, want := range map[sample.ObsEncoding]herdv1.ObsEncoding{
		sample.ObsFloat32: herdv1.ObsEncoding_OBS_ENCODING_FLOAT32,
		sample.ObsUint8:   herdv1.ObsEncoding_OBS_ENCODING_UINT8,
		sample.ObsBits:    herdv1.ObsEncoding_OBS_ENCODING_BITS,
	} {
		if herdv1.ObsEncoding(enc) != want {
			t.Errorf("sample encoding %d is %v on the wire", enc, herdv1.ObsEncoding(enc))
		}
	}
}

// TestNATSPackedObs: over NATS, binary planes travel one bit a value and
// 8-bit pixels one byte, anything else as float32; the policy worker
// sees the env worker's float32 bits in every case, and the stream counts
// the observation bytes it sent.
func TestNATSPackedObs(t *testing.T) {
	const dim = 20
	srv := startServer(t)
	ctx := ctxT(t, 30*time.Second)
	run := runID(t)
	opt := Options{ObsDim: dim, OutDim: 1}
	server, err := natsTransport(t, srv.URL()).Inference(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []uint32
	)
	serve(t, server, func(ctx context.Context, batch []*InferRequest) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range batch {
			for _, v := range r.Obs {
				seen = append(seen, math.Float32bits(v))
			}
			r.WeightsVersion = 1
		}
		return nil
	})
	client, err := natsTransport(t, srv.URL()).Inference(ctx, run, opt)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(f func(i int) float32) []float32 {
		obs := make([]float32, 3*dim) // 60 values: not a multiple of 8 bits
		for i := range obs {
			obs[i] = f(i)
		}
		return obs
	}
	cases := []struct {
		name  string
		obs   []float32
		bytes int
	}{
		{"bits", rows(func(i int) float32 { return float32(i % 3 % 2) }), (3*dim + 7) / 8},
		{"zeros", rows(func(int) float32 { return 0 }), (3*dim + 7) / 8},
		{"uint8", rows(func(i int) float32 { return float32(i * 4 % 256) }), 3 * dim},
		{"negative zero", rows(func(i int) float32 { return float32(math.Copysign(0, -float64(i%2))) }), 4 * 3 * dim},
		{"fractions", rows(func(i int) float32 { return float32(i) / 3 }), 4 * 3 * dim},
		{"256", rows(func(i int) float32 { return float32(i % 2 * 256) }), 4 * 3 * dim},
		{"NaN", rows(func(i int) float32 { return float32(math.NaN()) * float32(i%2) }), 4 * 3 * dim},
	}
	var sent uint64
	for _, c := range cases {
		mu.Lock()
		seen = seen[:0]
		mu.Unlock()
		if err := client.Infer(ctx, &InferRequest{Rows: 3, Obs: c.obs}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mu.Lock()
		for i, v := range c.obs {
			if i >= len(seen) || seen[i] != math.Float32bits(v) {
				t.Fatalf("%s: value %d reached the policy as %#x, sent %#x", c.name, i, seen[min(i, len(seen)-1)], math.Float32bits(v))
			}
		}
		mu.Unlock()
		sent += uint64(c.bytes)
		if got := client.Stats().ObsBytes; got != sent {
			t.Fatalf("%s: %d observation bytes counted, want %d", c.name, got, sent)
		}
	}

	raw := natsTransport(t, srv.URL())
	bits := herdv1.ObsEncoding_OBS_ENCODING_BITS
	for _, bad := range []struct {
		name string
		req  *herdv1.InferRequest
		want string
	}{
		{"short", &herdv1.InferRequest{Protocol: Protocol, Rows: 1, ObsDim: dim, ObsEncoding: bits, ObsPacked: make([]byte, 2)}, "malformed"},
		{"bits past the end", &herdv1.InferRequest{Protocol: Protocol, Rows: 1, ObsDim: dim, ObsEncoding: bits, ObsPacked: []byte{0, 0, 0x10}}, "bits past the end"},
		{"both", &herdv1.InferRequest{Protocol: Protocol, Rows: 1, ObsDim: dim, Obs: make([]float32, dim), ObsEncoding: bits, ObsPacked: make([]byte, 3)}, "malformed"},
		{"unknown encoding", &herdv1.InferRequest{Protocol: Protocol, Rows: 1, ObsDim: dim, ObsEncoding: 7, ObsPacked: make([]byte, 3)}, "malformed"},
		{"version 1", &herdv1.InferRequest{Protocol: herdv1.DistProtocol_DIST_PROTOCOL_1, Rows: 1, ObsDim: dim, Obs: make([]float32, dim)}, "got DIST_PROTOCOL_1, speak DIST_PROTOCOL_2"},
	} {
		m, err := raw.request(ctx, "herd."+run+".infer", mustMarshal(t, bad.req))
		if err != nil {
			t.Fatal(err)
		}
		var rep herdv1.InferReply
		if err := decode(m.Data, &rep); err != nil || !strings.Contains(rep.Error, bad.want) {
			t.Errorf("%s: reply %v %q, want an error saying %q", bad.name, err, rep.Error, bad.want)
		}
	}
}
