package replaysvc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	herdv1 "herd/proto/herd/v1"
	"herd/service"
)

// Record is one key's value and fields, as pushed and returned.
type Record struct {
	Key    string
	Value  []byte
	Fields map[string]float64
}

// ClientOptions configures Dial.
type ClientOptions struct {
	// TLS, when not nil, connects with TLS (and a client certificate when
	// it names one).
	TLS *service.TLSFiles
	// Timeout bounds every call whose context has no earlier deadline
	// (default service.DefaultTimeout).
	Timeout time.Duration
	// MaxMessageBytes bounds messages (default service.MaxMessageBytes).
	MaxMessageBytes int
}

// Client is the Go client of a replay server. It is safe for concurrent
// use; share one per process.
type Client struct {
	conn    *grpc.ClientConn
	rpc     herdv1.ReplayServiceClient
	timeout time.Duration
}

// Dial connects to the replay server at addr (host:port). The connection is
// made by the first call.
func Dial(addr string, opts ClientOptions) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = service.DefaultTimeout
	}
	var err error
	var conn *grpc.ClientConn
	if opts.TLS != nil {
		conf, cerr := opts.TLS.ClientConfig()
		if cerr != nil {
			return nil, cerr
		}
		conn, err = service.Dial(addr, conf, opts.MaxMessageBytes)
	} else {
		conn, err = service.Dial(addr, nil, opts.MaxMessageBytes)
	}
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rpc: herdv1.NewReplayServiceClient(conn), timeout: opts.Timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

const version = service.ProtocolVersion

// Push upserts recs in order.
func (c *Client) Push(ctx context.Context, recs []Record) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	req := &herdv1.PushRequest{ProtocolVersion: version, Records: make([]*herdv1.Record, len(recs))}
	for i, r := range recs {
		req.Records[i] = &herdv1.Record{Key: r.Key, Value: r.Value, Fields: r.Fields}
	}
	_, err := c.rpc.Push(ctx, req)
	return wrap("push", err)
}

// Get returns the records of keys, in order; withFields also returns their
// fields.
func (c *Client) Get(ctx context.Context, keys []string, withFields bool) ([]Record, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rpc.Get(ctx, &herdv1.GetRequest{ProtocolVersion: version, Keys: keys, WithFields: withFields})
	if err != nil {
		return nil, wrap("get", err)
	}
	return records(resp.GetRecords()), nil
}

// Sample draws n records with the named sampler ("" for the server's
// first).
func (c *Client) Sample(ctx context.Context, n int, sampler string) ([]Record, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if n <= 0 {
		return nil, fmt.Errorf("replaysvc: sample of %d, want > 0", n)
	}
	resp, err := c.rpc.Sample(ctx, &herdv1.SampleRequest{ProtocolVersion: version, N: uint32(n), Sampler: sampler})
	if err != nil {
		return nil, wrap("sample", err)
	}
	return records(resp.GetRecords()), nil
}

// UpdatePriorities sets field to priorities[i] on keys[i].
func (c *Client) UpdatePriorities(ctx context.Context, field string, keys []string, priorities []float64) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rpc.UpdatePriorities(ctx, &herdv1.UpdatePrioritiesRequest{ProtocolVersion: version, Field: field, Keys: keys, Priorities: priorities})
	return wrap("update priorities", err)
}

// Snapshot asks the server for a snapshot to its snapshot URL.
func (c *Client) Snapshot(ctx context.Context) (*herdv1.SnapshotResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rpc.Snapshot(ctx, &herdv1.SnapshotRequest{ProtocolVersion: version})
	return resp, wrap("snapshot", err)
}

// Flush returns once every record pushed before it is durable on the
// server's disk; it returns the store's size then.
func (c *Client) Flush(ctx context.Context) (int, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rpc.Flush(ctx, &herdv1.FlushRequest{ProtocolVersion: version})
	if err != nil {
		return 0, wrap("flush", err)
	}
	return int(resp.GetLen()), nil
}

// Describe reports the server's samplers, size and limits.
func (c *Client) Describe(ctx context.Context) (*herdv1.ReplayDescribeResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rpc.Describe(ctx, &herdv1.ReplayDescribeRequest{ProtocolVersion: version})
	return resp, wrap("describe", err)
}

func records(rs []*herdv1.Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = Record{Key: r.GetKey(), Value: r.GetValue(), Fields: r.GetFields()}
	}
	return out
}

// wrap keeps the gRPC status reachable (status.FromError, status.Code
// follow %w).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("replaysvc: %s: %w", op, err)
}
