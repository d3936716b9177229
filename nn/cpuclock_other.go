//go:build !unix

package nn

import (
	"errors"
	"time"
)

func processCPUClock() (func() time.Duration, error) {
	return nil, errors.New("no process CPU clock on this system")
}
