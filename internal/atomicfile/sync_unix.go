//go:build unix

package atomicfile

import "syscall"

// errSyncUnsupported is what fsync of a directory returns where the file
// system does not support it.
var errSyncUnsupported = syscall.EINVAL
