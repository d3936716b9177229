//go:build !unix

package atomicfile

import "errors"

// errSyncUnsupported: directories cannot be opened for sync on these
// systems; the error of os.File.Sync is then reported as is.
var errSyncUnsupported = errors.New("atomicfile: directory sync unsupported")
