//go:build unix

package algo

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

var errLocked = errors.New("locked")

// lockFile opens path and takes an exclusive, non-blocking flock on it. The
// lock is released by the kernel when the process exits, however it exits.
// It then writes its pid into the file, for the message another process
// gets. If the file was replaced while we waited for the lock (a racing
// abort removed it), the lock is retaken on the new file.
func lockFile(path string) (*os.File, error) {
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b[:n]))); perr == nil {
					return nil, fmt.Errorf("%w by pid %d", errLocked, pid)
				}
				return nil, errLocked
			}
			return nil, err
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			if err := f.Truncate(0); err == nil {
				f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("%s keeps being replaced", path)
}

func unlockFile(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	f.Close()
}
