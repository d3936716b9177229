//go:build cloud || gcs

package blobstore

import _ "gocloud.dev/blob/gcsblob" // gs:// URLs
