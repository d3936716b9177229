// Package herdv1 is the generated Go code for herd's wire protocol
// (proto/herd/v1/*.proto): the remote environment service (env.proto) and
// the replay service (replay.proto), and the distributed workers' messages
// (dist.proto, carried over NATS by package transport). Regenerate with proto/gen.sh; do not
// edit the *.pb.go files. Python stubs are generated beside python/herd_env.
package herdv1
