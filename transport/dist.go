package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	"herd/internal/scratch"
	"herd/nn"
	"herd/weights"
)

// Errors of this package. Each implementation wraps them with %w, so check
// with errors.Is.
var (
	// ErrClosed is returned by every call on a closed stream or service.
	ErrClosed = errors.New("dist: closed")
	// ErrBadRequest is returned for a call whose arguments are inconsistent
	// (rows and slice lengths that do not match the configured dimensions).
	// Retrying the same call cannot succeed.
	ErrBadRequest = errors.New("dist: bad request")
	// ErrMalformed marks a message that could not be decoded or that speaks
	// another protocol version. The receiver counts it, logs it and drops
	// it; a caller that gets it for its request may retry.
	ErrMalformed = errors.New("dist: malformed message")
	// ErrRejected is returned when the far side refused a request (its
	// reason follows in the message).
	ErrRejected = errors.New("dist: rejected by peer")
	// ErrName is returned for a run ID or member name outside the allowed
	// alphabet.
	ErrName = errors.New("dist: invalid name")
)

// InferRequest is one env worker's request for policy outputs. The env
// worker owns it and may reuse it after Infer returns.
type InferRequest struct {
	// Worker is the asking env worker's slot (logs and metrics only).
	Worker int
	// Rows is the number of observations.
	Rows int
	// Obs holds Rows × obs dim floats. The in-process stream hands this
	// very slice to the policy worker, so it must not change until Infer
	// returns.
	Obs []float32
	// Out receives Rows × out dim floats; Infer grows it when it is short
	// and reslices it to the exact length.
	Out []float32
	// WeightsVersion is set by the reply: the number of the weights that
	// produced Out.
	WeightsVersion uint64
	// Arrived is set by the stream for the policy worker: when the request
	// reached the stream (its queueing before a batch counts, its transit
	// does not).
	Arrived time.Time
}

// BatchHandler is a policy worker's forward pass: it fills Out (already
// sized Rows × out dim) and WeightsVersion of every request in batch. An
// error fails every request of the batch. The requests are valid only during
// the call.
type BatchHandler func(ctx context.Context, batch []*InferRequest) error

// InferenceStream carries observations from env workers to policy workers
// and outputs back (request-reply). Any number of goroutines, in any
// processes, call Infer and Serve on streams of the same run; each request
// is answered by exactly one server.
type InferenceStream interface {
	// Infer sends r and waits for its outputs. It is called by env
	// workers, each with its own request. ctx bounds the wait; on the NATS
	// stream it also bounds how long Infer waits for a first policy
	// worker to appear. ErrBadRequest means r itself is wrong;
	// ErrMalformed, ErrRejected and ctx errors may be retried.
	Infer(ctx context.Context, r *InferRequest) error
	// Serve runs one policy worker's loop until ctx ends (it then returns
	// nil) or the stream closes (ErrClosed): it waits for a request, takes
	// every other request already waiting (up to the configured batch
	// rows), calls h once for all of them, and answers them. So requests
	// that arrive while a batch runs form the next batch. Several Serve
	// calls share the load.
	Serve(ctx context.Context, h BatchHandler) error
	// Stats returns the stream's counters.
	Stats() Stats
	// Close stops the stream; blocked calls return ErrClosed.
	Close() error
}

// SampleStream carries finished samples (package sample's encoding) from
// env workers to learners, with back-pressure: a pusher blocks while the
// learners' queues are full, so memory stays bounded however far the env
// workers run ahead.
type SampleStream interface {
	// Push hands b to a learner; ownership of b passes to the stream (the
	// in-process stream delivers this very slice). It returns nil once
	// the sample is queued at a learner (under NoQueue: once a learner's
	// Pull has taken it) and blocks while none has room.
	// With no learner yet, the NATS stream waits for one until ctx ends.
	// An error leaves it unknown whether the sample was queued, except
	// ErrBadRequest (never sent): retry with the same id, and a learner
	// that already queued it acknowledges the repeat without queueing it
	// again (Stats.Duplicates counts them).
	Push(ctx context.Context, id SampleID, b []byte) error
	// Pull returns the next sample for this learner, blocking until there
	// is one. The first Pull makes the caller a learner (NATS: it joins
	// the learners' queue group).
	Pull(ctx context.Context) ([]byte, error)
	// Stats returns the stream's counters.
	Stats() Stats
	// Close stops the stream. Samples queued at this learner and not yet
	// pulled are dropped: they were acknowledged, so this is the loss a
	// learner crash causes (see the package doc).
	Close() error
}

// DedupWindow is a SampleStream whose memory of the sample ids it has
// taken can be saved with a learner's checkpoint and restored into the
// stream of the learner that resumes from it, so that a pusher's retry of
// a sample the checkpoint holds is acknowledged as a duplicate instead of
// learned again.
type DedupWindow interface {
	// MarshalDedup returns the ids of the samples Pull has returned.
	MarshalDedup() []byte
	// RestoreDedup makes b (MarshalDedup's) the ids taken, before the
	// first Pull. The first push of each (slot, incarnation) past b's
	// number counts the numbers it skipped in Stats.Lost.
	RestoreDedup(b []byte) error
}

// HeldBound is a ParamService that can tell a publisher starting on a run
// where an earlier publisher left off.
type HeldBound interface {
	// AboveHeld returns a version number above every version a reader of
	// the run may hold (0 when none was published): the first version a
	// restarted learner publishes must be at least that, since readers
	// keep only newer versions.
	AboveHeld(ctx context.Context) (uint64, error)
}

// ParamService publishes versioned weights. Versions only move forward: a
// reader never sees a version older than one it saw.
type ParamService interface {
	// Publish makes v the latest version; v.N must exceed the latest
	// known number (weights.ErrStale otherwise). Called by the learner.
	Publish(ctx context.Context, v *weights.Version) error
	// Latest returns the newest version known here without blocking, or
	// nil before any version is known.
	Latest() *weights.Version
	// Announced returns the number of the newest version known here,
	// held or still downloading (NATS announces a version before its
	// holders have fetched it); 0 before any.
	Announced() uint64
	// Wait returns the latest version once its number is at least n,
	// parking until then or until ctx ends.
	Wait(ctx context.Context, n uint64) (*weights.Version, error)
	// Stats returns the service's counters.
	Stats() Stats
	// Close stops the service.
	Close() error
}

// Member is one live registration.
type Member struct {
	Name string
	Info []byte
}

// Lease keeps a registration alive. Close removes it at once (a clean
// exit); ending the context given to Register instead stops the
// keep-alives and lets the registration expire after the TTL, exactly as a
// crashed process's does.
type Lease interface {
	Close() error
}

// Membership is the name service: workers register under unique names
// with keep-alives, the controller lists who is alive, and workers learn
// when the controller's registration is gone.
type Membership interface {
	// Register announces name with info and keeps it alive until ctx ends
	// or the lease is closed. Registering a live name replaces its info.
	Register(ctx context.Context, name string, info []byte) (Lease, error)
	// Members lists the live registrations, sorted by name.
	Members(ctx context.Context) ([]Member, error)
	// Gone returns a channel that is closed once name is not registered
	// (at once if it is not registered now). Watching stops when ctx ends.
	Gone(ctx context.Context, name string) (<-chan struct{}, error)
	// Resume starts a new incarnation of the worker name: it returns the
	// progress the run holds for name (zero for a first start) with
	// Incarnation one more, and stores that first, so two starts of a
	// name never share an incarnation.
	Resume(ctx context.Context, name string) (Progress, error)
	// Save stores name's progress. Unlike a registration it does not
	// expire: it outlives the worker, for its next incarnation.
	Save(ctx context.Context, name string, p Progress) error
	// Progress returns every worker's stored progress, by name.
	Progress(ctx context.Context) (map[string]Progress, error)
	// Stats returns the service's counters.
	Stats() Stats
	// Close stops the service's own goroutines.
	Close() error
}

// Progress is what a worker has done so far (Membership.Resume, Save).
type Progress struct {
	// Incarnation counts the starts of the worker (1: the first).
	Incarnation uint64
	// Seq is the last sample sequence number acknowledged to it.
	Seq uint64
	// Steps are the env steps it has taken, over all incarnations.
	Steps int64
	// FetchFailed counts weights versions it could not download in time,
	// Abandoned the inference requests it skipped because their sender had
	// stopped waiting (both over all incarnations).
	FetchFailed, Abandoned uint64
	// Batches and BatchRows count a policy worker's answered batches and
	// their rows (over all incarnations); the percentiles are over its
	// recent batches: rows per batch, and microseconds from a request's
	// arrival to its answer.
	Batches, BatchRows         uint64
	BatchRowsP50, BatchRowsP99 uint32
	LatencyP50us, LatencyP99us uint64
	// InferObsBytes counts the observation bytes an env worker's
	// inference requests carried (Stats.ObsBytes), over all incarnations.
	InferObsBytes uint64
}

// Transport makes the streams and services of runs. Streams of the same run
// made by transports on the same carrier (one Inproc, or NATS connections to
// the same server or cluster) are connected. ctx bounds only the setup
// (creating buckets, subscribing), not the life of what is returned.
type Transport interface {
	Inference(ctx context.Context, run string, opt Options) (InferenceStream, error)
	Samples(ctx context.Context, run string, opt Options) (SampleStream, error)
	Params(ctx context.Context, run string, opt Options) (ParamService, error)
	Membership(ctx context.Context, run string, opt Options) (Membership, error)
	// Collective joins member opt.Learner of the opt.Learners learners of
	// run (all-gather for data-parallel updates).
	Collective(ctx context.Context, run string, opt Options) (Collective, error)
}

// Collective joins the M learners of a run that compute each update
// together (runtime.learners): every round each member contributes one
// message and receives every member's. Members make the same sequence of
// AllGather calls; rounds are numbered by call, from 1. A member that
// joins a second time (a learner process started again) cannot take up
// the rounds where its first start left them: every member's round then
// fails at once with ErrGather, naming it, rather than at its deadline.
type Collective interface {
	// AllGather contributes b to this member's next round and returns
	// the round's contributions indexed by member id (out[own id] is b).
	// It waits at most the configured GatherTimeout (or until ctx ends)
	// and then fails naming the members it heard nothing from: a dead or
	// stopped learner ends the run with an error instead of a hang.
	AllGather(ctx context.Context, b []byte) ([][]byte, error)
	// Close leaves the group: a member waiting for a round this one has
	// not contributed to fails at once, naming it.
	Close() error
}

// ErrGather marks a Collective round that did not complete in time.
var ErrGather = errors.New("dist: learners' all-gather")

// sampleSubject is learner i's sample queue: herd.<run>.samples, and
// herd.<run>.samples.<i> for learners after the first.
func sampleSubject(run string, i int) string {
	if i == 0 {
		return "herd." + run + ".samples"
	}
	return fmt.Sprintf("herd.%s.samples.%d", run, i)
}

// checkGroup validates a Collective's options.
func (o Options) checkGroup() error {
	if o.Learners < 1 || o.Learner < 0 || o.Learner >= o.Learners {
		return fmt.Errorf("%w: learner %d of %d", ErrBadRequest, o.Learner, o.Learners)
	}
	return nil
}

// missing lists the members absent from got (nil entries), for a round's
// timeout error.
func missing(got [][]byte) []int {
	var m []int
	for i, b := range got {
		if b == nil {
			m = append(m, i)
		}
	}
	return m
}

// Stats are a stream's or service's counters since it was made.
type Stats struct {
	// Malformed counts messages dropped because they did not decode or
	// were inconsistent.
	Malformed uint64
	// WrongProtocol counts messages dropped because they speak another
	// protocol version.
	WrongProtocol uint64
	// Duplicates counts repeated pushes of a sample already queued
	// (acknowledged, not queued again).
	Duplicates uint64
	// FetchFailed counts weights versions a parameter service saw
	// announced but could not download in time: its holder acts on older
	// weights until the next version arrives.
	FetchFailed uint64
	// Abandoned counts inference requests skipped because their sender
	// had stopped waiting for the answer.
	Abandoned uint64
	// Shed counts pushes a learner refused unacknowledged because it held
	// Options.HeldBytes of pushes waiting for its queue already; their
	// pushers send them again (nothing is lost).
	Shed uint64
	// Queued is the number of samples acknowledged and waiting in the
	// learner's queue, not pulled yet (a gauge): those left when the
	// learner stops are discarded.
	Queued uint64
	// ObsBytes counts the observation bytes an inference stream's Infer
	// sent (NATS: in the smallest exact encoding, InferRequest's
	// obs_encoding; in process: none, nothing is encoded).
	ObsBytes uint64
	// Lost counts samples an earlier learner acknowledged after the dedup
	// window it restored (DedupWindow) was saved: the sequence numbers a
	// pusher skipped past the restored window's, which that learner took
	// and whose learning died with it.
	Lost uint64
}

// counters is the live form of Stats, shared by a stream's goroutines.
type counters struct {
	malformed, wrongProtocol, duplicates, fetchFailed, abandoned, shed, lost, obsBytes atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{Malformed: c.malformed.Load(), WrongProtocol: c.wrongProtocol.Load(), Duplicates: c.duplicates.Load(),
		FetchFailed: c.fetchFailed.Load(), Abandoned: c.abandoned.Load(), Shed: c.shed.Load(), Lost: c.lost.Load(),
		ObsBytes: c.obsBytes.Load()}
}

// drop counts and logs a message that could not be used. err wraps
// errWrongProtocol or not.
func (c *counters) drop(log *slog.Logger, where string, err error) {
	if errors.Is(err, errWrongProtocol) {
		c.wrongProtocol.Add(1)
	} else {
		c.malformed.Add(1)
	}
	log.Warn("dist: dropped message", "where", where, "err", err)
}

// Options configure the streams and services; the zero value means every
// default. Fields not used by a stream are ignored by it.
type Options struct {
	// ObsDim and OutDim are the widths of one observation and one row of
	// policy outputs (required by the inference stream).
	ObsDim, OutDim int
	// MaxBatchRows caps the rows a policy worker answers at once (default
	// 4096; a single larger request is still served alone).
	MaxBatchRows int
	// Capacity is the number of samples a learner queues before pushers
	// block (default 4); NoQueue for none: a push is acknowledged once a
	// learner has pulled its sample.
	Capacity int
	// TTL is how long a registration lives without a keep-alive (default
	// 3 s; NATS counts TTLs in whole seconds, so it rounds up there).
	TTL time.Duration
	// Logger receives dropped-message warnings (default: discarded).
	Logger *slog.Logger
	// Like lists the parameters of a model built from the run config
	// (names, shapes, layouts). The NATS parameter service needs it to
	// decode weights (weights.Decode); the in-process one passes versions
	// by pointer and ignores it.
	Like []*nn.Param
	// Learner picks the learner whose sample queue a sample stream pushes
	// to and pulls from (0, the default, is the only one of a run with one
	// learner). With several learners (runtime.learners) each has its own
	// queue and each env worker pushes to one fixed learner, so the
	// retries of a push reach the learner whose dedup memory may hold it:
	// a shared queue group could hand a retry to another learner, which
	// would learn the sample a second time.
	Learner int
	// Learners is the number of members of a Collective (≥ 1), Learner
	// the caller's id among them.
	Learners int
	// GatherTimeout bounds a Collective's wait for the other members'
	// contributions to one round (default 60 s).
	GatherTimeout time.Duration
	// HeldBytes bounds the bytes of pushes a NATS learner holds waiting
	// for room in its queue (default DefaultHeldBytes); one push is
	// always taken. A re-send of a push it holds costs no bytes: its ack
	// goes to the re-send. Beyond the bound a push is refused
	// unacknowledged (Stats.Shed) and its pusher sends it again.
	HeldBytes int
}

// DefaultHeldBytes is Options.HeldBytes's default (runtime.held_bytes).
const DefaultHeldBytes = 64 << 20

// NoQueue, as Options.Capacity, gives a learner no sample queue: Push
// returns when a learner's Pull has taken the sample, so a pusher knows
// its sample is being learned from, not waiting behind others (the
// on-policy topology's bound on policy lag rests on this).
const NoQueue = -1

func (o Options) withDefaults() Options {
	if o.MaxBatchRows <= 0 {
		o.MaxBatchRows = 4096
	}
	switch {
	case o.Capacity == NoQueue:
		o.Capacity = 0
	case o.Capacity <= 0:
		o.Capacity = 4
	}
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.GatherTimeout <= 0 {
		o.GatherTimeout = 60 * time.Second
	}
	if o.HeldBytes <= 0 {
		o.HeldBytes = DefaultHeldBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// checkDims validates the inference dimensions.
func (o Options) checkDims() error {
	if o.ObsDim <= 0 || o.OutDim <= 0 {
		return fmt.Errorf("%w: inference stream needs ObsDim and OutDim > 0, got %d and %d", ErrBadRequest, o.ObsDim, o.OutDim)
	}
	return nil
}

// checkRequest validates r against the dimensions and sizes r.Out.
func (o Options) checkRequest(r *InferRequest) error {
	if r.Rows <= 0 || len(r.Obs) != r.Rows*o.ObsDim {
		return fmt.Errorf("%w: %d rows need %d observation floats, got %d", ErrBadRequest, r.Rows, max(r.Rows, 0)*o.ObsDim, len(r.Obs))
	}
	r.Out = scratch.Resize(r.Out, r.Rows*o.OutDim)
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkName validates a run ID or member name: it becomes part of NATS
// subjects, stream and key names, so it is kept to a safe alphabet.
func checkName(what, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%w: %s %q must be 1–64 of A–Z a–z 0–9 _ -", ErrName, what, s)
	}
	return nil
}

// backoff returns the wait before retry i (0, 1, …): 5 ms doubling to 500 ms.
func backoff(i int) time.Duration {
	return min(5*time.Millisecond<<min(i, 7), 500*time.Millisecond)
}
