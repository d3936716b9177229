package transport

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Wire kinds: what a connection carries when each role dials one
// connection per kind (SplitTransport) and names it "<role> <kind>".
const (
	KindInference  = "inference"  // inference requests and replies
	KindSamples    = "samples"    // sample pushes and acks
	KindParams     = "params"     // weights: pushes, object-store puts, watches, fetches
	KindMembership = "membership" // registrations, keep-alives, watches, run config
)

// NumKinds is the number of wire kinds.
const NumKinds = 4

// Kinds lists the wire kinds in report order.
func Kinds() [NumKinds]string {
	return [NumKinds]string{KindInference, KindSamples, KindParams, KindMembership}
}

// ConnName names a connection of role carrying kind; KindOf reads it back.
func ConnName(role, kind string) string { return role + " " + kind }

// KindOf returns the wire kind of a connection named by ConnName, or "" for
// any other name.
func KindOf(name string) string {
	i := strings.LastIndexByte(name, ' ')
	if i < 0 {
		return ""
	}
	for _, k := range Kinds() {
		if name[i+1:] == k {
			return k
		}
	}
	return ""
}

// SplitTransport routes each kind of stream to its own transport: on NATS,
// one connection per kind, so that each connection's byte counters are
// that kind's traffic (Server.Traffic).
func SplitTransport(inference, samples, params, membership Transport) Transport {
	return split{inference, samples, params, membership}
}

type split struct{ inf, smp, par, mem Transport }

func (s split) Inference(ctx context.Context, run string, opt Options) (InferenceStream, error) {
	return s.inf.Inference(ctx, run, opt)
}

func (s split) Samples(ctx context.Context, run string, opt Options) (SampleStream, error) {
	return s.smp.Samples(ctx, run, opt)
}

func (s split) Params(ctx context.Context, run string, opt Options) (ParamService, error) {
	return s.par.Params(ctx, run, opt)
}

// Collective rides on the parameter connection: gradients are weights'
// traffic.
func (s split) Collective(ctx context.Context, run string, opt Options) (Collective, error) {
	return s.par.Collective(ctx, run, opt)
}

func (s split) Membership(ctx context.Context, run string, opt Options) (Membership, error) {
	return s.mem.Membership(ctx, run, opt)
}

// ConnTraffic is what crossed one client connection of a server: message
// payloads with their headers, both directions (In: client to server). The
// NATS protocol lines around each message (verb, subject, reply subject,
// sizes) and TLS framing are not counted, exactly as the client's
// nats.Conn.Stats does not count them.
type ConnTraffic struct {
	Name                               string
	InMsgs, OutMsgs, InBytes, OutBytes uint64
}

// Traffic returns the counters of every client connection the server has
// had, open or closed (the server keeps the last 10,000 closed ones). A
// connection closing as it is called may be missing or seen twice: see
// SettledTraffic.
func (s *Server) Traffic() ([]ConnTraffic, error) {
	byCID := map[uint64]ConnTraffic{}
	var order []uint64
	for _, state := range []server.ConnState{server.ConnOpen, server.ConnClosed} {
		for offset := 0; ; {
			cz, err := s.s.Connz(&server.ConnzOptions{State: state, Offset: offset, Limit: 1024})
			if err != nil {
				return nil, fmt.Errorf("dist: server connections: %w", err)
			}
			for _, c := range cz.Conns {
				if _, ok := byCID[c.Cid]; !ok {
					order = append(order, c.Cid)
				}
				// A closed record, read second, is the final one.
				byCID[c.Cid] = ConnTraffic{Name: c.Name, InMsgs: uint64(c.InMsgs), OutMsgs: uint64(c.OutMsgs),
					InBytes: uint64(c.InBytes), OutBytes: uint64(c.OutBytes)}
			}
			offset += len(cz.Conns)
			if len(cz.Conns) == 0 || offset >= cz.Total {
				break
			}
		}
	}
	out := make([]ConnTraffic, len(order))
	for i, cid := range order {
		out[i] = byCID[cid]
	}
	return out, nil
}

// SettledTraffic is Traffic once at most open connections are open and two
// reads 20 ms apart agree: the server records a closing connection's final
// counters in a goroutine of its own, after its peer has already seen the
// connection end. It gives up when ctx ends.
func (s *Server) SettledTraffic(ctx context.Context, open int) ([]ConnTraffic, error) {
	var last []ConnTraffic
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		cur, err := s.Traffic()
		if err != nil {
			return nil, err
		}
		if s.s.NumClients() <= open && slices.Equal(cur, last) {
			return cur, nil
		}
		last = cur
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: server connections did not settle: %w", ctx.Err())
		}
	}
}

// WireBytes sums traffic by kind (KindOf each connection's name); Other is
// the connections not named by ConnName, and Total counts every connection.
type WireBytes struct {
	ByKind map[string]uint64
	Other  uint64
	Total  uint64
}

// SumTraffic adds up conns' bytes, both directions, by kind.
func SumTraffic(conns []ConnTraffic) WireBytes {
	w := WireBytes{ByKind: make(map[string]uint64, NumKinds)}
	for _, c := range conns {
		b := c.InBytes + c.OutBytes
		w.Total += b
		if k := KindOf(c.Name); k != "" {
			w.ByKind[k] += b
		} else {
			w.Other += b
		}
	}
	return w
}
