package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"herd/algo"
	"herd/internal/atomicfile"
	"herd/transport"
)

// reportWire adds the run's wire bytes per env step, total and by kind, to
// the learner's summary.json in dir and prints them. They are what crossed
// the embedded server's client connections (transport.ConnTraffic:
// payloads and headers, both directions), so every message between two
// processes counts twice — once into the server, once out. A flow plan's
// actor calls (weights out, segments back) travel on the inference
// connection, reported under their own name; a learner group's gradients
// ride the parameter connection, reported with the weights.
func reportWire(w io.Writer, srv *transport.Server, dir string, rc algo.RuntimeConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conns, err := srv.SettledTraffic(ctx, 1) // the launcher's own connection stays open
	if err != nil {
		return err
	}
	path := filepath.Join(dir, algo.SummaryFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s struct {
		Steps int64 `json:"steps"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if s.Steps <= 0 {
		return fmt.Errorf("%s: no env steps", path)
	}
	ws := transport.SumTraffic(conns)
	perStep := func(n uint64) float64 { return math.Round(float64(n)/float64(s.Steps)*10) / 10 }
	type kindJSON struct {
		Bytes        uint64  `json:"bytes"`
		BytesPerStep float64 `json:"bytes_per_env_step"`
	}
	add := struct {
		Bytes        uint64              `json:"wire_bytes"`
		BytesPerStep float64             `json:"wire_bytes_per_env_step"`
		ByKind       map[string]kindJSON `json:"wire_by_kind"`
	}{Bytes: ws.Total, BytesPerStep: perStep(ws.Total), ByKind: map[string]kindJSON{}}
	line := fmt.Sprintf("wire: %.1f B/env step", add.BytesPerStep)
	for _, k := range transport.Kinds() {
		kj := kindJSON{ws.ByKind[k], perStep(ws.ByKind[k])}
		label := WireLabel(k)
		switch {
		case flowPlan(rc) && k == transport.KindInference:
			label = "actor_calls"
		case rc.Learners > 1 && k == transport.KindParams:
			label = "weights_and_gradients"
		}
		add.ByKind[label] = kj
		line += fmt.Sprintf(", %s %.1f", label, kj.BytesPerStep)
	}
	if ws.Other > 0 {
		add.ByKind["other"] = kindJSON{ws.Other, perStep(ws.Other)}
		line += fmt.Sprintf(", other %.1f", perStep(ws.Other))
	}
	out, err := mergeJSON(b, add)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%d B over %d env steps; payload + headers, in and out of the server)\n", line, ws.Total, s.Steps)
	return nil
}

// WireLabel is the name a wire kind has in herd's output and in
// summary.json's wire_by_kind: the parameter stream carries the policy's
// weights, and users read "weights".
func WireLabel(kind string) string {
	if kind == transport.KindParams {
		return "weights"
	}
	return kind
}

// mergeJSON appends add's fields to the JSON object obj, keeping obj's
// fields and their order as written.
func mergeJSON(obj []byte, add any) ([]byte, error) {
	a, err := json.MarshalIndent(add, "", "  ")
	if err != nil {
		return nil, err
	}
	o, x := bytes.TrimRight(obj, " \t\r\n"), bytes.TrimSpace(a)
	if !bytes.HasSuffix(o, []byte("}")) || len(x) < 2 {
		return nil, errors.New("not a JSON object")
	}
	o, x = bytes.TrimRight(o[:len(o)-1], " \t\r\n"), bytes.TrimSpace(x[1:len(x)-1])
	var m []byte
	m = append(m, o...)
	if !bytes.HasSuffix(o, []byte("{")) {
		m = append(m, ',')
	}
	m = append(m, "\n  "...)
	m = append(m, x...)
	m = append(m, "\n}\n"...)
	if !json.Valid(m) {
		return nil, errors.New("merged summary is not valid JSON")
	}
	return m, nil
}
