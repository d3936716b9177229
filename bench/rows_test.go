package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteRows(t *testing.T) {
	type row struct {
		Op      string  `json:"op"`
		Batch   int     `json:"batch"`
		NsPerOp float64 `json:"ns_per_op"`
	}
	rows := []row{{"set", 128, 1500.25}, {"sample", 128, 12.5}}
	var buf bytes.Buffer
	if err := writeRows(&buf, true, rows); err != nil {
		t.Fatal(err)
	}
	want := `{"op":"set","batch":128,"ns_per_op":1500.25}` + "\n" + `{"op":"sample","batch":128,"ns_per_op":12.5}` + "\n"
	if buf.String() != want {
		t.Fatalf("json:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := writeRows(&buf, false, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "ns_per_op") || !strings.Contains(lines[1], "1500") {
		t.Fatalf("table:\n%s", buf.String())
	}
	if err := writeRows(&buf, false, 3); err == nil {
		t.Fatal("want an error for a non-slice")
	}
}
