package distexec

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"herd/algo"
	"herd/transport"
)

// ErrRunActive marks a run ID that live processes hold on a NATS server:
// a second run on it would read and write the first one's streams.
var ErrRunActive = errors.New("distexec: run ID in use")

// runID is Run; else, where the streams live on a server other runs may
// share (sharedServer), an ID of the run directory's own (DirRunID), so
// that two runs from two directories never meet; else "herd" (the
// process's own in-process or embedded server).
func (o Options) runID(h algo.Header) string {
	switch {
	case o.Run != "":
		return o.Run
	case o.sharedServer():
		return DirRunID(h.Out)
	}
	return "herd"
}

// sharedServer: this process runs the whole run (herd train) on an
// external NATS server (runtime.nats_url), which other runs may use too.
// herd launch names its run (Run) and checks it itself.
func (o Options) sharedServer() bool {
	return !o.LearnerOnly && o.Dial == nil && o.Transport == "nats" && o.NATSURL != ""
}

// DirRunID is the run ID of the run directory dir on this host: "herd-"
// and a hash of the host's name and the directory's absolute path, the
// same each time the directory is trained or resumed here. The host name
// keeps apart the runs of machines or containers that write to the same
// path (a sweep of identical pods); the run directory's own lock keeps
// apart two processes of one host.
func DirRunID(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	host, _ := os.Hostname()
	h := fnv.New64a()
	h.Write([]byte(host))
	h.Write([]byte{0})
	h.Write([]byte(filepath.Clean(dir)))
	return fmt.Sprintf("herd-%016x", h.Sum64())
}

// trainMember is the name under which a herd train process holds its run
// on a shared server (claimRun); trainTTL is how soon after the process
// dies the hold lapses.
const (
	trainMember = "train"
	trainTTL    = 3 * time.Second
)

// claimRun holds run for this process on a shared server before any of its
// workers touches the run's streams: a run ID with live registrations
// (another herd train of the same directory and host, as a run without
// files, herd bench learn, may be; or a herd launch given this ID) is
// refused with ErrRunActive; else the process registers as trainMember
// until release.
func claimRun(ctx context.Context, opt Options, newTransport func() (transport.Transport, error), run string) (release func(), err error) {
	if !opt.sharedServer() {
		return func() {}, nil
	}
	tr, err := newTransport()
	if err != nil {
		return nil, err
	}
	mem, err := tr.Membership(ctx, run, transport.Options{TTL: trainTTL})
	if err != nil {
		return nil, err
	}
	if err := CheckRunFree(ctx, mem, run, trainTTL); err != nil {
		mem.Close()
		return nil, fmt.Errorf("%w; stop that run first, or train into another --out", err)
	}
	lease, err := mem.Register(ctx, trainMember, []byte(strconv.Itoa(os.Getpid())))
	if err != nil {
		mem.Close()
		return nil, err
	}
	return func() { _ = lease.Close(); mem.Close() }, nil
}

// CheckRunFree refuses, with ErrRunActive, a run ID that has live
// registrations (a herd train, a herd launch's controller or workers),
// naming them and their process ids.
func CheckRunFree(ctx context.Context, mem transport.Membership, runID string, ttl time.Duration) error {
	ms, err := mem.Members(ctx)
	if err != nil {
		return fmt.Errorf("distexec: run %s: %w", runID, err)
	}
	if len(ms) == 0 {
		return nil
	}
	var who []string
	for _, m := range ms {
		if len(m.Info) > 0 {
			who = append(who, fmt.Sprintf("%s (process %s)", m.Name, m.Info))
		} else {
			who = append(who, m.Name)
		}
	}
	slices.Sort(who)
	return fmt.Errorf("%w: run %s is active on this NATS: %s registered (the registrations of killed processes expire within %v)",
		ErrRunActive, runID, strings.Join(who, ", "), ttl)
}

// workersRegister reports whether ms holds a worker's registration: the
// workers of herd launch register, those of herd train (goroutines) do
// not, whose process holds the run as trainMember.
func workersRegister(ms []transport.Member) bool {
	return slices.ContainsFunc(ms, func(m transport.Member) bool { return m.Name != trainMember })
}
