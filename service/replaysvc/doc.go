// Package replaysvc serves a persistent replay store (herd/replay/persist)
// over gRPC with the herd.v1 ReplayService protocol
// (proto/herd/v1/replay.proto), so that actors and learners in any language
// push to it and sample from it: `herd serve replay` runs it (Run), Client is the
// Go client, and python/herd_env/replay.py the Python one.
//
// # Calls
//
//	Push              a batch of records, validated whole (keys, value size,
//	                  every sampler's fields) before any is written, then
//	                  pushed in order with the store's Push
//	Get               records by key (NOT_FOUND names the first missing one)
//	Sample            n records drawn by a named sampler (uniform,
//	                  prioritized, priority-time, as the server was started)
//	UpdatePriorities  set one field of existing records: a read, then a
//	                  Push of the same value with the new field, so every
//	                  sampler re-indexes the key; updates are serialised
//	                  with each other, not with concurrent Pushes of the
//	                  same key (the later write wins)
//	Snapshot          the store's Snapshot to its snapshot URL
//
// Every call is independent and the store is safe for concurrent use, so
// any number of clients may call at once; gRPC runs each call on its own
// goroutine. Errors are gRPC statuses: bad input INVALID_ARGUMENT, a wrong
// protocol version FAILED_PRECONDITION, a full write queue
// RESOURCE_EXHAUSTED (retry), a closed store UNAVAILABLE.
package replaysvc
