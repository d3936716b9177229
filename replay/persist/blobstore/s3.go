//go:build cloud || s3

package blobstore

import _ "gocloud.dev/blob/s3blob" // s3:// URLs
