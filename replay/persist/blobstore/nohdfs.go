//go:build !(cloud || hdfs)

package blobstore

import "net/url"

// openHDFS: this build has no HDFS backend (see Build tags).
func openHDFS(u *url.URL) (Bucket, error) { return nil, errLeftOut(u) }
