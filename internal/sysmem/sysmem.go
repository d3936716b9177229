// Package sysmem tells how much memory this process may still allocate, so
// that a configuration whose estimated needs exceed it is refused with an
// error naming the setting, not ended by the Go runtime's fatal "out of
// memory".
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Available returns the bytes this process may still allocate and where
// the figure comes from: MemAvailable of /proc/meminfo, lowered to the
// cgroup v2 limit minus current usage when that is smaller. It returns 0
// when neither can be read (systems other than Linux): callers then skip
// their check.
func Available() (int64, string) {
	var avail int64
	src := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					avail, src = kb<<10, "MemAvailable in /proc/meminfo"
				}
			}
		}
	}
	limit, lerr := readInt("/sys/fs/cgroup/memory.max")
	cur, cerr := readInt("/sys/fs/cgroup/memory.current")
	if lerr == nil && cerr == nil && limit > cur && (avail == 0 || limit-cur < avail) {
		avail, src = limit-cur, "cgroup memory.max minus memory.current"
	}
	return avail, src
}

// Check returns an error when need bytes exceed Available; what names the
// setting responsible, e.g. "buffer_size=1000000000000 (replay buffer)".
// It returns nil when the available memory is unknown.
func Check(need float64, what string) error {
	avail, src := Available()
	if avail <= 0 || need <= float64(avail) {
		return nil
	}
	return fmt.Errorf("%s needs about %s, more than the %s available (%s)", what, Format(need), Format(float64(avail)), src)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // "max" fails: no limit
}

// Format writes a byte count with a binary unit: "1.5 GiB".
func Format(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
