// Package atomicfile writes files so that a reader, or a crash, never sees a
// half-written one: the data goes to a temporary file in the same directory,
// is fsynced, and is renamed over the final name; the directory is fsynced
// too, so that the rename itself survives a power loss.
//
// herd's run directories (algo.TrainRun) use it for config.yaml,
// summary.json and the commit of every staged run file.
package atomicfile
