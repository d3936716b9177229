package tfevents

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The first two records of a file written by TensorFlow 2.1's
// tf.summary.scalar("my_metric", 0.5*step, step=step) (testdata of
// github.com/orktes/go-tensorboard, events.out.tfevents.1585499054…v2):
// the file_version event, then step 0 as a float tensor with the scalars
// plugin's metadata. Reading them checks herd's CRC masking and framing
// against TensorFlow's own writer.
const tensorflowRecords = "1800000000000000a37f4b2209000080eb32a0d7411a0d627261696e2e4576656e743a32af5dfc92" +
	"31000000000000009d8383e909ca8988eb32a0d7412a260a240a096d795f6d6574726963420a080112002204000000004a0b0a090a077363616c6172736e649f69"

func TestReadsTensorFlowRecords(t *testing.T) {
	b, err := hex.DecodeString(tensorflowRecords)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	p := m["my_metric"]
	if len(p) != 1 || p[0].Step != 0 || p[0].Value != 0 || math.Abs(p[0].Wall-1585499054.1) > 1 {
		t.Fatalf("read %+v, want my_metric = 0 at step 0, wall ≈ 1585499054", m)
	}
	// The length headers' checksums, as TensorFlow wrote them.
	for _, c := range []struct {
		n    byte
		want uint32
	}{{24, 0x224b7fa3}, {49, 0xe983839d}} {
		if got := MaskedCRC([]byte{c.n, 0, 0, 0, 0, 0, 0, 0}); got != c.want {
			t.Errorf("masked CRC of length %d = %#x, want %#x", c.n, got, c.want)
		}
	}
	// One flipped bit anywhere is an error, never a wrong value.
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		if _, err := Read(bytes.NewReader(d)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flipped in byte %d: %v, want ErrCorrupt", i, err)
		}
	}
}

func TestWriteReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.out.tfevents.test")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	tags := []string{"charts/episodic_return", "losses/value_loss"}
	for step := int64(1000); step <= 3000; step += 1000 {
		if err := w.Scalars(step, t0.Add(time.Duration(step)*time.Millisecond), tags, []float64{float64(step) / 10, math.NaN()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Scalars(4000, t0, tags, []float64{1, 2, 3}); err == nil {
		t.Fatal("3 values for 2 tags accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	m, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	ret := m["charts/episodic_return"]
	if len(ret) != 3 || ret[2].Step != 3000 || ret[2].Value != 300 || ret[0].Wall != 1700000001 {
		t.Fatalf("charts/episodic_return read back as %+v", ret)
	}
	if _, ok := m["losses/value_loss"]; ok {
		t.Fatal("NaN values were written")
	}
	if !bytes.Contains(b, []byte(FileVersion)) {
		t.Fatal("no file_version event")
	}
}
