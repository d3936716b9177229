package replaysvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"herd/replay/persist"
	"herd/service"
)

// RunOptions are `herd serve replay`'s settings.
type RunOptions struct {
	Serve service.ServeOptions
	// Store configures the persistent store; its Mode, Durability and
	// Samplers are set from the fields below.
	Store persist.Options
	// Mode is hybrid, memory or disk; Durability writeback or sync.
	Mode, Durability string
	// Samplers are NAME=KIND[:FIELD:PARAM] (ParseSampler); the first is
	// Sample's default.
	Samplers []string
	// MaxBatch bounds the records of one Push, Get, UpdatePriorities or
	// Sample.
	MaxBatch int
	// Stderr receives the restore report, warnings and the store's log.
	Stderr io.Writer
}

// Run opens the store and serves it until ctx ends, saying so on w. A
// store that failed or did not close cleanly is a failure, never a clean
// interruption.
func Run(ctx context.Context, w io.Writer, o RunOptions) error {
	stderr := o.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	opts := o.Store
	if o.MaxBatch < 1 {
		return fmt.Errorf("serve replay: --max-batch: must be >= 1, got %d", o.MaxBatch)
	}
	var err error
	if opts.Mode, err = persist.ParseMode(o.Mode); err != nil {
		return fmt.Errorf("serve replay: %w", err)
	}
	switch o.Durability {
	case "writeback":
		opts.Durability = persist.WriteBack
	case "sync":
		opts.Durability = persist.Sync
	default:
		return fmt.Errorf("serve replay: --durability %q, want writeback or sync", o.Durability)
	}
	for _, spec := range o.Samplers {
		sp, err := ParseSampler(spec)
		if err != nil {
			return fmt.Errorf("serve replay: %w", err)
		}
		opts.Samplers = append(opts.Samplers, sp)
	}
	if opts.Dir != "" {
		// The store would fail deep inside on a file, with an unlinkat error.
		if fi, err := os.Stat(opts.Dir); err == nil && !fi.IsDir() {
			return fmt.Errorf("serve replay: --dir %s is not a directory", opts.Dir)
		}
	}
	opts.EnsureDefaults()
	opts.Registerer = o.Serve.Registerer()
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	made := newDirs(opts)
	store, err := persist.Open(ctx, opts)
	if err != nil {
		removeNew(made)
		return fmt.Errorf("serve replay: %w", err)
	}
	return serve(ctx, w, stderr, o, opts, store, made)
}

// serve serves store, which Run opened, until ctx ends. When it fails
// (not a clean interruption) with a store it created that holds no
// record, it removes what Run created (made, newDirs).
func serve(ctx context.Context, w, stderr io.Writer, o RunOptions, opts persist.Options, store *persist.Store, made []string) (err error) {
	defer func() {
		if err != nil && !errors.Is(err, context.Canceled) && store.Len() == 0 {
			removeNew(made)
		}
	}()
	if info, ok := store.Restored(); ok {
		fmt.Fprintf(stderr, "serve replay: restored snapshot %d from %s (%d records)\n", info.Snapshot, opts.RestoreFrom, store.Len())
		if len(info.Skipped) > 0 {
			fmt.Fprintf(stderr, "serve replay: warning: the %d newer snapshot(s) up to %d were skipped: %v\n",
				len(info.Skipped), info.Newest, errors.Join(info.Skipped...))
		}
	}
	srv, err := New(Config{Store: store, Samplers: opts.Samplers, Mode: opts.Mode,
		MaxValueBytes: opts.MaxValueBytes, MaxBatch: o.MaxBatch, Registerer: opts.Registerer})
	if err != nil {
		store.Close()
		return fmt.Errorf("serve replay: %w", err)
	}
	// A store whose disk failed keeps serving reads and refuses writes
	// (RESOURCE_EXHAUSTED for a full disk); say so once.
	watchDone := make(chan struct{})
	defer close(watchDone)
	go func() {
		select {
		case <-store.Failed():
			fmt.Fprintf(stderr, "serve replay: the store refuses writes from now on: %v; reads are still served; "+
				"stop the server once clients are done, free space and restart it\n", store.Err())
		case <-watchDone:
		}
	}()
	serveErr := service.Run(ctx, w, fmt.Sprintf("replay store %s (%v)", opts.Dir, opts.Mode), o.Serve, srv.Register)
	closeErr := store.Close()
	if werr := store.Err(); werr != nil {
		lost := "every acknowledged record is durable"
		if opts.Durability == persist.WriteBack {
			lost = "records acknowledged since the last successful Flush were not written"
		}
		return fmt.Errorf("serve replay: the store failed: %v (%s; closing: %v)", werr, lost, closeErr)
	}
	if closeErr != nil {
		// %v: a store that did not close cleanly is a failure, never a
		// clean interruption.
		return fmt.Errorf("serve replay: closing the store: %v (serving: %v)", closeErr, serveErr)
	}
	return serveErr
}

// newDirs lists the store's directory (Dir/db) and those of its parents
// (Dir, …) that do not exist yet, deepest first: what opening the store
// creates, and what a failed `herd serve replay` removes again.
func newDirs(opts persist.Options) []string {
	if opts.Mode == persist.Memory || opts.Dir == "" {
		return nil
	}
	var out []string
	for d := filepath.Join(opts.Dir, "db"); ; {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		p := filepath.Dir(d)
		if p == d {
			return out
		}
		d = p
	}
}

// removeNew removes the directories of newDirs: the store's own (Dir/db,
// with the empty database this run made), then each parent while it is
// empty.
func removeNew(made []string) {
	for i, d := range made {
		var err error
		if i == 0 {
			err = os.RemoveAll(d)
		} else {
			err = os.Remove(d) // fails when something else lives there
		}
		if err != nil {
			return
		}
	}
}
