package persist

import (
	"bytes"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Value: []byte("payload"), Fields: map[string]float64{"b": 2.5, "a": -1, "priority": 0}}
	enc := encodeRecord(r)
	got, err := decodeRecord(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Value, r.Value) || len(got.Fields) != 3 || got.Fields["b"] != 2.5 || got.Fields["a"] != -1 {
		t.Fatalf("round trip: %+v", got)
	}
	// Field order does not change the encoding.
	if !bytes.Equal(enc, encodeRecord(Record{Value: []byte("payload"), Fields: map[string]float64{"priority": 0, "a": -1, "b": 2.5}})) {
		t.Fatal("encoding depends on map order")
	}
	if off, _ := valueOffset(enc); !bytes.Equal(enc[off:], r.Value) {
		t.Fatal("valueOffset")
	}
	for _, bad := range [][]byte{nil, {9}, {recordVersion}, {recordVersion, 1, 5, 'a'}, enc[:5]} {
		if _, err := decodeRecord(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %v: %v, want ErrCorrupt", bad, err)
		}
	}
}
