package tfevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrCorrupt marks an event file whose framing, checksums or protobuf
// encoding is wrong.
var ErrCorrupt = errors.New("tfevents: corrupt event file")

// FileVersion is the file_version of the first event of every file.
const FileVersion = "brain.Event:2"

// Field numbers of tensorflow.Event, tensorflow.Summary,
// tensorflow.Summary.Value and tensorflow.TensorProto.
const (
	eventWallTime    = 1
	eventStep        = 2
	eventFileVersion = 3
	eventSummary     = 5
	summaryValue     = 1
	valueTag         = 1
	valueSimple      = 2
	valueTensor      = 8
	tensorDtype      = 1
	tensorContent    = 4
	tensorFloatVal   = 5
	tensorDoubleVal  = 6
	dtFloat          = 1
	dtDouble         = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's masked CRC-32C of b.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Writer appends events to one file.
type Writer struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte // the event being encoded, reused
	val []byte // one Summary.Value, reused
	err error
}

// Create creates (or truncates) the event file at path and writes its first
// event.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f)}
	b := protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallSeconds(time.Now())))
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	b = protowire.AppendString(b, FileVersion)
	w.record(b)
	return w, nil
}

// CreateWith creates (or truncates) the event file at path holding prefix,
// the bytes of an earlier Writer's file up to a point (read back after its
// Flush), and appends to it: a resumed run continues its event file where
// its checkpoint was taken.
func CreateWith(path string, prefix []byte) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f)}
	if _, err := w.w.Write(prefix); err != nil {
		w.err = fmt.Errorf("tfevents: %w", err)
	}
	return w, nil
}

func wallSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Scalars writes one event at step holding a (tag, value) pair per tag.
// NaN values are left out (TensorBoard would draw them as gaps anyway).
func (w *Writer) Scalars(step int64, wall time.Time, tags []string, values []float64) error {
	if len(tags) != len(values) {
		return fmt.Errorf("tfevents: %d tags for %d values", len(tags), len(values))
	}
	var sum []byte
	b := w.buf[:0]
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallSeconds(wall)))
	b = protowire.AppendTag(b, eventStep, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(step))
	sum = w.val[:0]
	var summary []byte
	for i, tag := range tags {
		if math.IsNaN(values[i]) {
			continue
		}
		v := protowire.AppendTag(sum[:0], valueTag, protowire.BytesType)
		v = protowire.AppendString(v, tag)
		v = protowire.AppendTag(v, valueSimple, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[i])))
		summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
		summary = protowire.AppendBytes(summary, v)
		sum = v
	}
	w.val = sum
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	b = protowire.AppendBytes(b, summary)
	w.buf = b
	w.record(b)
	return w.err
}

// record frames data as one TFRecord.
func (w *Writer) record(data []byte) {
	if w.err != nil {
		return
	}
	var h [12]byte
	binary.LittleEndian.PutUint64(h[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(h[8:], MaskedCRC(h[:8]))
	var t [4]byte
	binary.LittleEndian.PutUint32(t[:], MaskedCRC(data))
	for _, p := range [][]byte{h[:], data, t[:]} {
		if _, err := w.w.Write(p); err != nil {
			w.err = fmt.Errorf("tfevents: %w", err)
			return
		}
	}
}

// Flush writes the buffered events to the file.
func (w *Writer) Flush() error {
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("tfevents: %w", err)
		}
	}
	return w.err
}

// Close flushes, syncs and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	return errors.Join(err, w.f.Close())
}

// Point is one scalar value read back.
type Point struct {
	Step  int64
	Wall  float64 // seconds since the Unix epoch
	Value float64
}

// ReadFile reads every scalar of the event file at path, by tag, in file
// order.
func ReadFile(path string) (map[string][]Point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tfevents: %w", err)
	}
	defer f.Close()
	return Read(bufio.NewReader(f))
}

// Read reads every scalar of an event stream, by tag.
func Read(r io.Reader) (map[string][]Point, error) {
	out := map[string][]Point{}
	var h [12]byte
	for n := 0; ; n++ {
		if _, err := io.ReadFull(r, h[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%w: record %d: header: %v", ErrCorrupt, n, err)
		}
		if MaskedCRC(h[:8]) != binary.LittleEndian.Uint32(h[8:]) {
			return nil, fmt.Errorf("%w: record %d: length checksum", ErrCorrupt, n)
		}
		size := binary.LittleEndian.Uint64(h[:8])
		if size > 1<<30 {
			return nil, fmt.Errorf("%w: record %d: length %d", ErrCorrupt, n, size)
		}
		data := make([]byte, size+4)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%w: record %d: data: %v", ErrCorrupt, n, err)
		}
		if MaskedCRC(data[:size]) != binary.LittleEndian.Uint32(data[size:]) {
			return nil, fmt.Errorf("%w: record %d: data checksum", ErrCorrupt, n)
		}
		if err := readEvent(data[:size], out); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, n, err)
		}
	}
}

// fields calls f for each field of the message b.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func readEvent(b []byte, out map[string][]Point) error {
	var p Point
	var summary []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			p.Wall = math.Float64frombits(x)
		case num == eventStep && typ == protowire.VarintType:
			p.Step = int64(x)
		case num == eventSummary && typ == protowire.BytesType:
			summary = v
		}
		return nil
	})
	if err != nil || summary == nil {
		return err
	}
	return fields(summary, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != summaryValue || typ != protowire.BytesType {
			return nil
		}
		tag, val, ok, err := readValue(v)
		if ok {
			q := p
			q.Value = val
			out[tag] = append(out[tag], q)
		}
		return err
	})
}

// readValue decodes a Summary.Value holding a scalar: simple_value, or a
// one-element float or double tensor (TensorFlow 2).
func readValue(b []byte) (tag string, val float64, ok bool, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			tag = string(v)
		case num == valueSimple && typ == protowire.Fixed32Type:
			val, ok = float64(math.Float32frombits(uint32(x))), true
		case num == valueTensor && typ == protowire.BytesType:
			var e error
			val, ok, e = readScalarTensor(v)
			return e
		}
		return nil
	})
	return tag, val, ok, err
}

func readScalarTensor(b []byte) (val float64, ok bool, err error) {
	dtype := uint64(0)
	var content []byte
	var vals []float64
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == tensorDtype && typ == protowire.VarintType:
			dtype = x
		case num == tensorContent && typ == protowire.BytesType:
			content = v
		case num == tensorFloatVal && typ == protowire.BytesType: // packed
			for len(v) >= 4 {
				vals = append(vals, float64(math.Float32frombits(binary.LittleEndian.Uint32(v))))
				v = v[4:]
			}
		case num == tensorFloatVal && typ == protowire.Fixed32Type:
			vals = append(vals, float64(math.Float32frombits(uint32(x))))
		case num == tensorDoubleVal && typ == protowire.BytesType:
			for len(v) >= 8 {
				vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(v)))
				v = v[8:]
			}
		case num == tensorDoubleVal && typ == protowire.Fixed64Type:
			vals = append(vals, math.Float64frombits(x))
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, false, err
	case len(vals) == 1:
		return vals[0], true, nil
	case dtype == dtFloat && len(content) == 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(content))), true, nil
	case dtype == dtDouble && len(content) == 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(content)), true, nil
	}
	return 0, false, nil
}
