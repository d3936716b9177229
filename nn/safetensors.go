package nn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"herd/internal/atomicfile"
)

// The safetensors format (huggingface/safetensors, docs "Format"):
//
//	8 bytes   N, little-endian uint64: header size
//	N bytes   JSON object: name → {"dtype","shape","data_offsets":[begin,end]},
//	          plus an optional "__metadata__": {string: string}
//	rest      the byte buffer; offsets are relative to its start
//
// Only F32 tensors are read and written. Weights of Linear layers are
// stored [out, in] as PyTorch's nn.Linear holds them, so
// torch `safetensors.torch.load_file` + `load_state_dict` loads an MLP
// checkpoint into the matching nn.Sequential.

// maxHeader bounds the JSON header (the reference implementation uses 100 MB).
const maxHeader = 100 << 20

type stEntry struct {
	Dtype       string `json:"dtype"`
	Shape       []int  `json:"shape"`
	DataOffsets [2]int `json:"data_offsets"`
}

// Checkpoint is a decoded safetensors file.
type Checkpoint struct {
	Tensors  map[string]Tensor
	Metadata map[string]string
}

// WriteSafetensors writes tensors (and optional string metadata) in the
// safetensors format. Data is laid out in sorted name order, so the same
// tensors always give the same bytes.
func WriteSafetensors(w io.Writer, tensors map[string]Tensor, metadata map[string]string) error {
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == "" || name == "__metadata__" {
			return fmt.Errorf("%w: safetensors: invalid tensor name %q", ErrConfig, name)
		}
		if numel(t.Shape) != len(t.Data) {
			return fmt.Errorf("%w: safetensors: tensor %q shape %v holds %d values, has %d", ErrShape, name, t.Shape, numel(t.Shape), len(t.Data))
		}
		names = append(names, name)
	}
	sort.Strings(names)
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	off := 0
	for _, name := range names {
		t := tensors[name]
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[name] = stEntry{Dtype: "F32", Shape: shape, DataOffsets: [2]int{off, off + 4*len(t.Data)}}
		off += 4 * len(t.Data)
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("nn: safetensors header: %w", err)
	}
	// Pad with spaces to 8 bytes so the buffer is aligned, as the reference
	// writer does.
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	buf := make([]byte, 8, 8+len(hj)+off)
	binary.LittleEndian.PutUint64(buf, uint64(len(hj)))
	buf = append(buf, hj...)
	for _, name := range names {
		for _, v := range tensors[name].Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	_, err = w.Write(buf)
	return err
}

// ReadSafetensors decodes a safetensors stream. Any structural problem
// (short file, header too large or not JSON, unknown dtype, offsets out of
// range, overlapping or gapped data, size not matching the shape) is an
// error wrapping ErrCorrupt.
func ReadSafetensors(r io.Reader) (*Checkpoint, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: safetensors: reading header size: %v", ErrCorrupt, err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n < 2 || n > maxHeader {
		return nil, fmt.Errorf("%w: safetensors: header size %d out of range", ErrCorrupt, n)
	}
	// Read through a limit rather than allocating n bytes up front, so a
	// damaged size field cannot make a tiny file allocate 100 MB.
	hj, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return nil, fmt.Errorf("nn: safetensors: reading header: %w", err)
	}
	if uint64(len(hj)) != n {
		return nil, fmt.Errorf("%w: safetensors: header of %d bytes truncated to %d", ErrCorrupt, n, len(hj))
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("nn: safetensors: reading data: %w", err)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hj))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: safetensors: header is not a JSON object: %v", ErrCorrupt, err)
	}
	ck := &Checkpoint{Tensors: map[string]Tensor{}}
	type span struct {
		b, e int
		name string
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &ck.Metadata); err != nil {
				return nil, fmt.Errorf("%w: safetensors: __metadata__ must map strings to strings: %v", ErrCorrupt, err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%w: safetensors: tensor %q: %v", ErrCorrupt, name, err)
		}
		if e.Dtype != "F32" {
			return nil, fmt.Errorf("%w: safetensors: tensor %q has dtype %q; only F32 is supported", ErrCorrupt, name, e.Dtype)
		}
		count := 1
		for _, s := range e.Shape {
			if s < 0 || (s > 0 && count > math.MaxInt32/s) {
				return nil, fmt.Errorf("%w: safetensors: tensor %q has bad shape %v", ErrCorrupt, name, e.Shape)
			}
			count *= s
		}
		b, en := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || en < b || en > len(data) {
			return nil, fmt.Errorf("%w: safetensors: tensor %q offsets [%d,%d] outside data of %d bytes (truncated file?)", ErrCorrupt, name, b, en, len(data))
		}
		if en-b != 4*count {
			return nil, fmt.Errorf("%w: safetensors: tensor %q spans %d bytes, shape %v needs %d", ErrCorrupt, name, en-b, e.Shape, 4*count)
		}
		t := Tensor{Shape: e.Shape, Data: make([]float32, count)}
		for i := range t.Data {
			t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[b+4*i:]))
		}
		ck.Tensors[name] = t
		spans = append(spans, span{b, en, name})
	}
	// The buffer must be covered exactly, without overlaps or holes.
	slices.SortFunc(spans, func(x, y span) int { return x.b - y.b })
	end := 0
	for _, s := range spans {
		if s.b != end {
			return nil, fmt.Errorf("%w: safetensors: tensor %q starts at %d, expected %d (overlap or gap)", ErrCorrupt, s.name, s.b, end)
		}
		end = s.e
	}
	if end != len(data) {
		return nil, fmt.Errorf("%w: safetensors: %d trailing bytes after the last tensor", ErrCorrupt, len(data)-end)
	}
	return ck, nil
}

// Save writes params as a safetensors checkpoint (weights in PyTorch
// layout) with optional metadata.
func Save(w io.Writer, params []*Param, metadata map[string]string) error {
	tensors := make(map[string]Tensor, len(params))
	for _, p := range params {
		if _, dup := tensors[p.Name]; dup {
			return fmt.Errorf("%w: safetensors: duplicate parameter name %q", ErrConfig, p.Name)
		}
		data := p.Value
		if p.Transposed {
			data = make([]float32, len(p.Value))
			transposeTo(data, p.Value, p.Shape[1], p.Shape[0])
		}
		tensors[p.Name] = Tensor{Shape: p.Shape, Data: data}
	}
	return WriteSafetensors(w, tensors, metadata)
}

// Load reads a safetensors checkpoint and copies the tensor named after
// each parameter into it. A missing tensor is an ErrMissing error, a shape
// mismatch an ErrShape error, a damaged file an ErrCorrupt error; params
// are modified only when every check passes. Extra tensors are ignored.
func Load(r io.Reader, params []*Param) (map[string]string, error) {
	ck, err := ReadSafetensors(r)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range params {
		t, ok := ck.Tensors[p.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %q", ErrMissing, p.Name))
			continue
		}
		if !slices.Equal(t.Shape, p.Shape) {
			errs = append(errs, fmt.Errorf("%w: tensor %q has shape %v, parameter wants %v", ErrShape, p.Name, t.Shape, p.Shape))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, p := range params {
		t := ck.Tensors[p.Name]
		if p.Transposed {
			transposeTo(p.Value, t.Data, p.Shape[0], p.Shape[1])
		} else {
			copy(p.Value, t.Data)
		}
	}
	return ck.Metadata, nil
}

// SaveFile writes a checkpoint to path atomically (temporary file in the
// same directory, fsync, rename), so a crash never leaves a half-written
// checkpoint under the final name (internal/atomicfile, which also
// fsyncs the directory).
func SaveFile(path string, params []*Param, metadata map[string]string) error {
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return Save(w, params, metadata) })
	if err != nil {
		return fmt.Errorf("nn: save %s: %w", path, err)
	}
	return nil
}

// LoadFile loads a checkpoint from path into params (see Load).
func LoadFile(path string, params []*Param) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: load %s: %w", path, err)
	}
	defer f.Close()
	md, err := Load(f, params)
	if err != nil {
		return nil, fmt.Errorf("nn: load %s: %w", path, err)
	}
	return md, nil
}
