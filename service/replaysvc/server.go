package replaysvc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	herdv1 "herd/proto/herd/v1"
	"herd/replay/persist"
	"herd/service"
)

// DefaultMaxBatch bounds the records of one Push, the keys of one Get or
// UpdatePriorities and n of one Sample, unless Config says otherwise.
const DefaultMaxBatch = 65536

// Config configures a Server.
type Config struct {
	// Store is the store served; the caller opens and closes it.
	Store *persist.Store
	// Samplers are the samplers the store was opened with (the server checks
	// pushed fields against them and lists them in Describe). The first is
	// the default of Sample.
	Samplers []persist.Sampler
	// Mode is reported by Describe.
	Mode persist.Mode
	// MaxValueBytes is the store's value limit (checked before any write of
	// a batch); 0 leaves the check to the store.
	MaxValueBytes int
	// MaxBatch bounds batches (default DefaultMaxBatch).
	MaxBatch int
	// Registerer, when set, receives the server's metrics (records,
	// pushes, samples; see metrics.go).
	Registerer prometheus.Registerer
}

// Server implements herdv1.ReplayServiceServer over a persist.Store.
type Server struct {
	herdv1.UnimplementedReplayServiceServer
	cfg      Config
	updateMu sync.Mutex // serialises UpdatePriorities' read-modify-writes
	metrics  *serverMetrics
}

// New returns a Server for cfg.Store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: replay server without a store", service.ErrConfig)
	}
	if len(cfg.Samplers) == 0 {
		return nil, fmt.Errorf("%w: replay server without samplers", service.ErrConfig)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	s := &Server{cfg: cfg}
	var err error
	if s.metrics, err = newServerMetrics(cfg.Registerer, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { herdv1.RegisterReplayServiceServer(g, s) }

func checkVersion(v uint32) error {
	if v != service.ProtocolVersion {
		return status.Errorf(codes.FailedPrecondition, "protocol version %d; this server speaks %d", v, service.ProtocolVersion)
	}
	return nil
}

func (s *Server) checkBatch(what string, n int) error {
	if n == 0 || n > s.cfg.MaxBatch {
		return status.Errorf(codes.InvalidArgument, "%s of %d, want 1..%d", what, n, s.cfg.MaxBatch)
	}
	return nil
}

// storeErr maps a store error to a gRPC status.
func storeErr(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, persist.ErrEmptyKey), errors.Is(err, persist.ErrTooLarge), errors.Is(err, persist.ErrUnknownSampler):
		code = codes.InvalidArgument
	case errors.Is(err, persist.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, persist.ErrQueueFull), errors.Is(err, persist.ErrDiskFull), errors.Is(err, syscall.ENOSPC):
		code = codes.ResourceExhausted
	case errors.Is(err, persist.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, persist.ErrNoSnapshotURL):
		code = codes.FailedPrecondition
	case errors.Is(err, persist.ErrCorrupt):
		code = codes.DataLoss
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}

func (s *Server) Describe(_ context.Context, req *herdv1.ReplayDescribeRequest) (*herdv1.ReplayDescribeResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	resp := &herdv1.ReplayDescribeResponse{ProtocolVersions: []uint32{service.ProtocolVersion},
		Len: uint64(s.cfg.Store.Len()), Mode: s.cfg.Mode.String(), MaxBatch: uint32(s.cfg.MaxBatch)}
	for _, sp := range s.cfg.Samplers {
		resp.Samplers = append(resp.Samplers, &herdv1.SamplerInfo{Name: sp.Name(), Fields: sp.Fields()})
	}
	return resp, nil
}

// checkRecord validates one record as the store and every sampler would.
func (s *Server) checkRecord(i int, key string, value []byte, fields map[string]float64) error {
	if key == "" {
		return status.Errorf(codes.InvalidArgument, "record %d: empty key", i)
	}
	if s.cfg.MaxValueBytes > 0 && len(value) > s.cfg.MaxValueBytes {
		return status.Errorf(codes.InvalidArgument, "record %d (%q): value of %d bytes, limit %d", i, key, len(value), s.cfg.MaxValueBytes)
	}
	for _, sp := range s.cfg.Samplers {
		if err := sp.Check(fields); err != nil {
			return status.Errorf(codes.InvalidArgument, "record %d (%q): %v", i, key, err)
		}
	}
	return nil
}

func (s *Server) Push(ctx context.Context, req *herdv1.PushRequest) (*herdv1.PushResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	recs := req.GetRecords()
	if err := s.checkBatch("push", len(recs)); err != nil {
		return nil, err
	}
	for i, r := range recs {
		if err := s.checkRecord(i, r.GetKey(), r.GetValue(), r.GetFields()); err != nil {
			return nil, err
		}
	}
	for i, r := range recs {
		if err := s.cfg.Store.Push(ctx, r.GetKey(), persist.Record{Value: r.GetValue(), Fields: r.GetFields()}); err != nil {
			s.metrics.push(i)
			return nil, status.Errorf(status.Code(storeErr(err)), "pushed %d of %d records, then: %v", i, len(recs), err)
		}
	}
	s.metrics.push(len(recs))
	return &herdv1.PushResponse{Pushed: uint32(len(recs))}, nil
}

func (s *Server) Get(_ context.Context, req *herdv1.GetRequest) (*herdv1.GetResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	keys := req.GetKeys()
	if err := s.checkBatch("get", len(keys)); err != nil {
		return nil, err
	}
	resp := &herdv1.GetResponse{Records: make([]*herdv1.Record, len(keys))}
	for i, k := range keys {
		var rec persist.Record
		var err error
		if req.GetWithFields() {
			rec, err = s.cfg.Store.GetRecord(k)
		} else {
			rec.Value, err = s.cfg.Store.Get(k)
		}
		if err != nil {
			return nil, storeErr(err)
		}
		resp.Records[i] = &herdv1.Record{Key: k, Value: rec.Value, Fields: rec.Fields}
	}
	return resp, nil
}

func (s *Server) Sample(_ context.Context, req *herdv1.SampleRequest) (*herdv1.SampleResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	if err := s.checkBatch("sample", int(req.GetN())); err != nil {
		return nil, err
	}
	name := req.GetSampler()
	if name == "" {
		name = s.cfg.Samplers[0].Name()
	}
	t0 := time.Now()
	items, err := s.cfg.Store.Sample(nil, int(req.GetN()), name)
	if err != nil {
		return nil, storeErr(err)
	}
	s.metrics.sample(len(items), t0)
	resp := &herdv1.SampleResponse{Records: make([]*herdv1.Record, len(items))}
	for i, it := range items {
		resp.Records[i] = &herdv1.Record{Key: it.Key, Value: it.Value}
	}
	return resp, nil
}

func (s *Server) UpdatePriorities(ctx context.Context, req *herdv1.UpdatePrioritiesRequest) (*herdv1.UpdatePrioritiesResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	keys, prios := req.GetKeys(), req.GetPriorities()
	if err := s.checkBatch("update", len(keys)); err != nil {
		return nil, err
	}
	if len(prios) != len(keys) || req.GetField() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "update of field %q with %d keys and %d priorities", req.GetField(), len(keys), len(prios))
	}
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	recs := make([]persist.Record, len(keys))
	for i, k := range keys {
		rec, err := s.cfg.Store.GetRecord(k)
		if err != nil {
			return nil, storeErr(err)
		}
		fields := make(map[string]float64, len(rec.Fields)+1)
		for f, v := range rec.Fields {
			fields[f] = v
		}
		fields[req.GetField()] = prios[i]
		if err := s.checkRecord(i, k, nil, fields); err != nil {
			return nil, err
		}
		recs[i] = persist.Record{Value: rec.Value, Fields: fields}
	}
	for i, k := range keys {
		if err := s.cfg.Store.Push(ctx, k, recs[i]); err != nil {
			s.metrics.push(i)
			return nil, status.Errorf(status.Code(storeErr(err)), "updated %d of %d keys, then: %v", i, len(keys), err)
		}
	}
	s.metrics.push(len(keys))
	return &herdv1.UpdatePrioritiesResponse{Updated: uint32(len(keys))}, nil
}

func (s *Server) Snapshot(ctx context.Context, req *herdv1.SnapshotRequest) (*herdv1.SnapshotResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	info, err := s.cfg.Store.Snapshot(ctx)
	if err != nil {
		return nil, storeErr(err)
	}
	return &herdv1.SnapshotResponse{Id: info.ID, Seq: info.Seq, Len: uint64(info.Len), Manifest: info.Manifest,
		UploadedBytes: uint64(info.UploadedBytes)}, nil
}

// Flush makes every record pushed before it durable (persist.Store.Flush).
func (s *Server) Flush(ctx context.Context, req *herdv1.FlushRequest) (*herdv1.FlushResponse, error) {
	if err := checkVersion(req.GetProtocolVersion()); err != nil {
		return nil, err
	}
	if err := s.cfg.Store.Flush(ctx); err != nil {
		return nil, storeErr(err)
	}
	return &herdv1.FlushResponse{Len: uint64(s.cfg.Store.Len())}, nil
}

// ParseSampler reads a sampler from NAME=KIND[:FIELD:PARAM], the form of
// `herd serve replay --sampler`: uniform, prioritized:FIELD:ALPHA (e.g.
// per=prioritized:priority:0.6) or prioritytime:FIELD:DECAY.
func ParseSampler(spec string) (persist.Sampler, error) {
	bad := func(format string, args ...any) (persist.Sampler, error) {
		return nil, fmt.Errorf("%w: sampler %q: "+format, append([]any{service.ErrConfig, spec}, args...)...)
	}
	name, def, ok := strings.Cut(spec, "=")
	if !ok || name == "" {
		return bad("want NAME=uniform, NAME=prioritized:FIELD:ALPHA or NAME=prioritytime:FIELD:DECAY")
	}
	parts := strings.Split(def, ":")
	switch parts[0] {
	case "uniform":
		if len(parts) != 1 {
			return bad("uniform takes no parameters")
		}
		return persist.NewUniform(name), nil
	case "prioritized", "prioritytime":
		if len(parts) != 3 || parts[1] == "" {
			return bad("want %s:FIELD:NUMBER", parts[0])
		}
		x, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return bad("%q is not a number", parts[2])
		}
		if parts[0] == "prioritized" {
			if x < 0 {
				return bad("alpha %v < 0", x)
			}
			return persist.NewPrioritized(name, parts[1], x), nil
		}
		if !(x > 0 && x <= 1) {
			return bad("decay %v not in (0, 1]", x)
		}
		return persist.NewPriorityTime(name, parts[1], x), nil
	}
	return bad("unknown kind %q", parts[0])
}
