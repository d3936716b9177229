package persist

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// Mode picks where records live.
type Mode int

const (
	// Hybrid keeps hot records in an LRU cache of CacheMB and evicts the
	// least recently used to Pebble (write-back). The default.
	Hybrid Mode = iota
	// Memory keeps every record in memory; CacheMB is ignored, nothing
	// survives Close except through a snapshot.
	Memory
	// Disk writes every record to Pebble and keeps no cache.
	Disk
)

func (m Mode) String() string {
	switch m {
	case Hybrid:
		return "hybrid"
	case Memory:
		return "memory"
	case Disk:
		return "disk"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode is the inverse of Mode.String.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Hybrid, Memory, Disk} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: mode %q (want hybrid, memory or disk)", ErrInvalidOptions, s)
}

// Durability says when a Push counts as acknowledged; see doc.go, "What a
// crash can lose".
type Durability int

const (
	// WriteBack acknowledges a Push once it is queued (the default).
	WriteBack Durability = iota
	// Sync acknowledges a Push once it is in Pebble with its WAL synced
	// (write-through; in Memory mode, once applied to memory).
	Sync
)

// QueueFull says what a Push does when the p0 queue is full.
type QueueFull int

const (
	// QueueFullBlock waits for room or for the Push's context (default).
	QueueFullBlock QueueFull = iota
	// QueueFullError returns ErrQueueFull at once.
	QueueFullError
)

// Options configures Open. The zero value of each field means its default;
// Open calls EnsureDefaults and Validate.
type Options struct {
	// Mode: Hybrid (default), Memory or Disk.
	Mode Mode
	// Dir holds the Pebble store (Dir/db) and snapshot checkpoints. Required
	// in Hybrid and Disk modes and for snapshots.
	Dir string
	// FS is the filesystem for Dir; default vfs.Default. Tests pass
	// vfs.NewMem() or an error-injecting FS.
	FS vfs.FS
	// CacheMB bounds the cache in Hybrid mode, counting keys, values and
	// per-entry overhead. Default 256.
	CacheMB int
	// MaxValueBytes rejects larger values with ErrTooLarge. Default 64 MiB.
	MaxValueBytes int
	// Durability: WriteBack (default) or Sync.
	Durability Durability
	// QueueP0 and QueueP1 bound the two task queues. Defaults 4096 and 1024.
	QueueP0, QueueP1 int
	// QueueFull: QueueFullBlock (default) or QueueFullError.
	QueueFull QueueFull
	// P0Prob is the probability of taking p0 when both queues have work.
	// Default 0.8.
	P0Prob float64
	// Seed seeds the task picker and the samplers (via internal/rng).
	Seed uint64
	// Samplers are indexed on every Push and Delete; Sample picks one by
	// Name. Default: one Uniform.
	Samplers []Sampler
	// SnapshotURL is where Snapshot uploads (file://; s3://, gs://,
	// azblob://, hdfs:// when built with -tags cloud, see blobstore).
	// Empty disables snapshots.
	SnapshotURL string
	// SnapshotEvery is the period of automatic snapshots when SnapshotURL is
	// set. Default 3 minutes; negative disables the timer.
	SnapshotEvery time.Duration
	// RestoreFrom, if set, is a snapshot URL to restore from at Open: the
	// newest snapshot with an intact manifest. Dir must not hold a store
	// yet. A failed restore leaves Dir as it was (doc.go, "Restores").
	RestoreFrom string
	// PebbleCacheMB is Pebble's block cache. Default 64.
	PebbleCacheMB int
	// Registerer receives the store's metrics; nil means no metrics.
	Registerer prometheus.Registerer
	// Logger receives the few events worth a line that are not errors of
	// the call that met them: a corrupt snapshot manifest skipped for an
	// older snapshot on restore, a damaged bucket object re-uploaded by
	// Snapshot. nil discards them.
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheMB == 0 {
		o.CacheMB = 256
	}
	if o.MaxValueBytes == 0 {
		o.MaxValueBytes = 64 << 20
	}
	if o.QueueP0 == 0 {
		o.QueueP0 = 4096
	}
	if o.QueueP1 == 0 {
		o.QueueP1 = 1024
	}
	if o.P0Prob == 0 {
		o.P0Prob = 0.8
	}
	if len(o.Samplers) == 0 {
		o.Samplers = []Sampler{NewUniform("uniform")}
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = 3 * time.Minute
	}
	if o.PebbleCacheMB == 0 {
		o.PebbleCacheMB = 64
	}
}

// Validate reports every problem with o, joined, each wrapping
// ErrInvalidOptions.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.Mode < Hybrid || o.Mode > Disk {
		bad("unknown mode %d", int(o.Mode))
	}
	if o.Mode != Memory && o.Dir == "" {
		bad("mode %v needs Dir", o.Mode)
	}
	if o.CacheMB < 0 {
		bad("CacheMB %d < 0", o.CacheMB)
	}
	if o.MaxValueBytes < 0 {
		bad("MaxValueBytes %d < 0", o.MaxValueBytes)
	}
	if o.QueueP0 < 0 || o.QueueP1 < 0 {
		bad("queue sizes %d, %d must be positive", o.QueueP0, o.QueueP1)
	}
	if !(o.P0Prob > 0 && o.P0Prob <= 1) || math.IsNaN(o.P0Prob) {
		bad("P0Prob %v not in (0, 1]", o.P0Prob)
	}
	if o.Durability < WriteBack || o.Durability > Sync {
		bad("unknown durability %d", int(o.Durability))
	}
	if o.QueueFull < QueueFullBlock || o.QueueFull > QueueFullError {
		bad("unknown QueueFull %d", int(o.QueueFull))
	}
	seen := map[string]bool{}
	for i, s := range o.Samplers {
		if s == nil {
			bad("sampler %d is nil", i)
			continue
		}
		if s.Name() == "" || seen[s.Name()] {
			bad("sampler %d: empty or duplicate name %q", i, s.Name())
		}
		seen[s.Name()] = true
	}
	return errors.Join(errs...)
}
