// Package tfevents writes and reads TensorBoard event files: the scalars of
// a run, so that `tensorboard --logdir runs` shows herd's runs beside any
// other.
//
// # Format
//
// An event file is a sequence of TFRecords. Each record is
//
//	uint64 length (little-endian)
//	uint32 masked CRC-32C of the 8 length bytes
//	length bytes of data: one serialized tensorflow.Event
//	uint32 masked CRC-32C of the data
//
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (CRC-32C is the
// Castagnoli polynomial). The first event carries file_version
// "brain.Event:2"; each later one a wall time, a step and a
// tensorflow.Summary whose values are (tag, simple_value) pairs. Only those
// fields of event.proto and summary.proto are written, encoded with
// protowire (field numbers: Event wall_time 1, step 2, file_version 3,
// summary 5; Summary value 1; Value tag 1, simple_value 2, tensor 8).
//
// The reader also accepts scalars written by TensorFlow 2's summary API
// (a one-element float tensor in Value.tensor), and checks both CRCs of every
// record: a damaged file is an ErrCorrupt error, never a wrong value.
//
// # Use
//
//	w, err := tfevents.Create(filepath.Join(dir, "events.out.tfevents.herd"))
//	err = w.Scalars(step, time.Now(), []string{"charts/sps"}, []float64{1234})
//	err = w.Close()
//
//	points, err := tfevents.ReadFile(path) // map tag → []Point{Step, Wall, Value}
//
// A Writer belongs to one goroutine; it buffers records and writes them on
// Flush and Close.
package tfevents
