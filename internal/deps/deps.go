//go:build tools

// Package deps pins the project's third-party modules in go.mod while the
// packages that import them are being written. It is never built.
package deps

import (
	_ "github.com/ByteArena/box2d"
	_ "github.com/cockroachdb/datadriven"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/colinmarc/hdfs/v2"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "go.yaml.in/yaml/v4"
	_ "gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
	_ "gonum.org/v1/gonum/blas/blas32"
	_ "gonum.org/v1/plot"
)
