package run

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sync"
)

// StartCPUProfile writes a CPU profile of this process to path until the
// returned stop is called; an empty path profiles nothing. stop reports a
// profile that could not be written whole (a full disk): runtime/pprof
// drops its write errors, so a command would otherwise exit 0 with an
// empty or truncated profile.
func StartCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	w := &firstErrWriter{w: pf}
	if err := pprof.StartCPUProfile(w); err != nil {
		pf.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	var serr error
	return func() error {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := errors.Join(w.err, pf.Close()); err != nil {
				serr = fmt.Errorf("cpu profile %s not written: %w", path, err)
			}
		})
		return serr
	}, nil
}

// firstErrWriter passes writes to w and keeps the first error.
type firstErrWriter struct {
	w   io.Writer
	err error
}

func (f *firstErrWriter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(p)
	f.err = err
	return n, err
}
