//go:build cloud || azblob

package blobstore

import _ "gocloud.dev/blob/azureblob" // azblob:// URLs
