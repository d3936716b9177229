package persist

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// Record is what Push stores under a key: an opaque value plus the numeric
// fields that samplers index (a priority, a time step, a score …). Fields a
// sampler declares stay in memory in its index even when the value is on
// disk.
type Record struct {
	Value  []byte
	Fields map[string]float64
}

// recordVersion is the first byte of every encoded record.
const recordVersion = 1

// Encoded record, format version 1 (the Pebble value, and the body of each
// entry in a snapshot's cache file):
//
//	byte     version (1)
//	uvarint  number of fields F
//	F times: uvarint name length, name bytes, 8 bytes float64 (little endian)
//	rest     the value
//
// Fields are written sorted by name so that equal records encode equally.
func encodeRecord(r Record) []byte {
	n := 1 + binary.MaxVarintLen64
	names := make([]string, 0, len(r.Fields))
	for k := range r.Fields {
		names = append(names, k)
		n += binary.MaxVarintLen64 + len(k) + 8
	}
	sort.Strings(names)
	buf := make([]byte, 0, n+len(r.Value))
	buf = append(buf, recordVersion)
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for _, k := range names {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.Fields[k]))
	}
	return append(buf, r.Value...)
}

// valueOffset returns where the value starts in an encoded record.
func valueOffset(enc []byte) (int, error) {
	off, err := walkFields(enc, nil)
	return off, err
}

// walkFields calls f for each field of enc (f may be nil) and returns the
// value's offset.
func walkFields(enc []byte, f func(name []byte, v float64)) (int, error) {
	if len(enc) == 0 || enc[0] != recordVersion {
		return 0, fmt.Errorf("%w: record version %v", ErrCorrupt, head(enc))
	}
	off := 1
	nf, k := binary.Uvarint(enc[off:])
	if k <= 0 || nf > uint64(len(enc)) {
		return 0, fmt.Errorf("%w: record field count", ErrCorrupt)
	}
	off += k
	for i := uint64(0); i < nf; i++ {
		l, k := binary.Uvarint(enc[off:])
		if k <= 0 || l > uint64(len(enc)-off-k) || len(enc)-off-k-int(l) < 8 {
			return 0, fmt.Errorf("%w: record field %d", ErrCorrupt, i)
		}
		off += k
		name := enc[off : off+int(l)]
		off += int(l)
		v := math.Float64frombits(binary.LittleEndian.Uint64(enc[off:]))
		off += 8
		if f != nil {
			f(name, v)
		}
	}
	return off, nil
}

func head(b []byte) any {
	if len(b) == 0 {
		return "empty"
	}
	return b[0]
}

// decodeRecord decodes enc into a Record whose Value aliases enc.
func decodeRecord(enc []byte) (Record, error) {
	var fields map[string]float64
	off, err := walkFields(enc, func(name []byte, v float64) {
		if fields == nil {
			fields = map[string]float64{}
		}
		fields[string(name)] = v
	})
	if err != nil {
		return Record{}, err
	}
	return Record{Value: enc[off:], Fields: fields}, nil
}
