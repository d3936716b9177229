package trainstate

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"herd/internal/atomicfile"
)

// Version is the format version this herd writes and reads.
const Version = 1

var magic = [8]byte{'H', 'E', 'R', 'D', 'S', 'T', 'A', 'T'}

// Errors that Decode and Dir.Load wrap.
var (
	// ErrCorrupt: the bytes are not a whole checkpoint (truncated, checksum
	// mismatch, malformed section table).
	ErrCorrupt = errors.New("trainstate: corrupt checkpoint")
	// ErrVersion: a checkpoint of a format version this herd cannot read.
	ErrVersion = errors.New("trainstate: unsupported checkpoint format version")
	// ErrMismatch: a checkpoint of another run (algorithm, env or config).
	ErrMismatch = errors.New("trainstate: checkpoint does not match the run")
	// ErrNone: the directory holds no checkpoint that loads.
	ErrNone = errors.New("trainstate: no usable checkpoint")
)

// Header says what run a checkpoint belongs to and where it was taken.
type Header struct {
	Algo       string `json:"algo"`
	Env        string `json:"env"`
	ConfigHash string `json:"config_hash"` // hash of the config keys that must not change on resume
	Step       int64  `json:"step"`        // env steps done when the checkpoint was taken
}

// State is a decoded checkpoint: its header and its named sections.
type State struct {
	Header   Header
	Sections map[string][]byte
}

// Put stores m's binary form (a math/rand/v2 PCG or ChaCha8, for instance)
// as section name.
func (s *State) Put(name string, m encoding.BinaryMarshaler) error {
	b, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("trainstate: section %s: %w", name, err)
	}
	if s.Sections == nil {
		s.Sections = map[string][]byte{}
	}
	s.Sections[name] = b
	return nil
}

// Section returns section name's bytes; a missing section is an error
// naming it.
func (s *State) Section(name string) ([]byte, error) {
	b, ok := s.Sections[name]
	if !ok {
		return nil, fmt.Errorf("%w: no section %s", ErrCorrupt, name)
	}
	return b, nil
}

// Get restores u from section name; a missing section is an error naming it.
func (s *State) Get(name string, u encoding.BinaryUnmarshaler) error {
	b, err := s.Section(name)
	if err != nil {
		return err
	}
	if err := u.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("trainstate: section %s: %w", name, err)
	}
	return nil
}

// Encode writes s: magic, version, header (JSON), the sections in name
// order (so equal states give equal bytes), and the SHA-256 of it all.
func Encode(w io.Writer, s State) error {
	var buf bytes.Buffer
	buf.Write(magic[:])
	binary.Write(&buf, binary.LittleEndian, uint32(Version))
	hj, err := json.Marshal(s.Header)
	if err != nil {
		return fmt.Errorf("trainstate: %w", err)
	}
	binary.Write(&buf, binary.LittleEndian, uint32(len(hj)))
	buf.Write(hj)
	names := make([]string, 0, len(s.Sections))
	for n := range s.Sections {
		if n == "" || len(n) > 0xffff {
			return fmt.Errorf("trainstate: section name %q: empty or too long", n)
		}
		names = append(names, n)
	}
	slices.Sort(names)
	binary.Write(&buf, binary.LittleEndian, uint32(len(names)))
	for _, n := range names {
		binary.Write(&buf, binary.LittleEndian, uint16(len(n)))
		buf.WriteString(n)
		binary.Write(&buf, binary.LittleEndian, uint64(len(s.Sections[n])))
		buf.Write(s.Sections[n])
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("trainstate: %w", err)
	}
	return nil
}

// Decode reads a checkpoint written by Encode, checking its checksum first.
func Decode(b []byte) (State, error) {
	if len(b) < len(magic)+4+sha256.Size || !bytes.Equal(b[:len(magic)], magic[:]) {
		return State{}, fmt.Errorf("%w: not a herd training-state checkpoint, or truncated (%d bytes)", ErrCorrupt, len(b))
	}
	if v := binary.LittleEndian.Uint32(b[len(magic):]); v != Version {
		return State{}, fmt.Errorf("%w: %d (this herd reads %d)", ErrVersion, v, Version)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return State{}, fmt.Errorf("%w: checksum mismatch (truncated or altered)", ErrCorrupt)
	}
	r := body[len(magic)+4:]
	take := func(n uint64) ([]byte, error) {
		if n > uint64(len(r)) {
			return nil, fmt.Errorf("%w: a length of %d runs past the end", ErrCorrupt, n)
		}
		p := r[:n]
		r = r[n:]
		return p, nil
	}
	u := func(n int) (uint64, error) {
		p, err := take(uint64(n))
		if err != nil {
			return 0, err
		}
		switch n {
		case 2:
			return uint64(binary.LittleEndian.Uint16(p)), nil
		case 4:
			return uint64(binary.LittleEndian.Uint32(p)), nil
		}
		return binary.LittleEndian.Uint64(p), nil
	}
	var s State
	hl, err := u(4)
	if err != nil {
		return State{}, err
	}
	hj, err := take(hl)
	if err != nil {
		return State{}, err
	}
	if err := json.Unmarshal(hj, &s.Header); err != nil {
		return State{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	ns, err := u(4)
	if err != nil {
		return State{}, err
	}
	s.Sections = map[string][]byte{}
	for range ns {
		nl, err := u(2)
		if err != nil {
			return State{}, err
		}
		name, err := take(nl)
		if err != nil {
			return State{}, err
		}
		dl, err := u(8)
		if err != nil {
			return State{}, err
		}
		data, err := take(dl)
		if err != nil {
			return State{}, err
		}
		if _, dup := s.Sections[string(name)]; dup {
			return State{}, fmt.Errorf("%w: section %s twice", ErrCorrupt, name)
		}
		s.Sections[string(name)] = slices.Clone(data)
	}
	if len(r) != 0 {
		return State{}, fmt.Errorf("%w: %d bytes after the last section", ErrCorrupt, len(r))
	}
	return s, nil
}

// Check compares the header of a checkpoint with the run that would resume
// from it, naming every difference. The step is not compared.
func Check(got, want Header) error {
	var diff []string
	if got.Algo != want.Algo {
		diff = append(diff, fmt.Sprintf("algorithm %s, not %s", got.Algo, want.Algo))
	}
	if got.Env != want.Env {
		diff = append(diff, fmt.Sprintf("env %s, not %s", got.Env, want.Env))
	}
	if got.ConfigHash != want.ConfigHash {
		diff = append(diff, fmt.Sprintf("config hash %s, not %s (a key other than the step budget or logging changed)", got.ConfigHash, want.ConfigHash))
	}
	if len(diff) == 0 {
		return nil
	}
	return fmt.Errorf("%w: it was taken for %s", ErrMismatch, strings.Join(diff, "; "))
}

// Dir holds the checkpoints of one run directory.
type Dir struct {
	Path string
	Keep int // how many checkpoints to keep; below 1 means 1
}

const prefix, suffix = "state-", ".herdstate"

func name(step int64) string { return fmt.Sprintf("%s%015d%s", prefix, step, suffix) }

// List returns the names of d's checkpoint files, oldest first.
func (d Dir) List() ([]string, error) {
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, fmt.Errorf("trainstate: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, suffix) {
			continue
		}
		if _, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(n, prefix), suffix), 10, 64); err != nil {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out) // zero-padded steps sort as numbers
	return out, nil
}

// Save writes s as the checkpoint of its step (staged, fsynced, renamed)
// and then removes all but the newest Keep. It returns the file's path.
func (d Dir) Save(s State) (string, error) {
	if s.Header.Step < 0 {
		return "", fmt.Errorf("trainstate: negative step %d", s.Header.Step)
	}
	p := filepath.Join(d.Path, name(s.Header.Step))
	if err := atomicfile.Write(p, 0o644, func(w io.Writer) error { return Encode(w, s) }); err != nil {
		return "", err
	}
	names, err := d.List()
	if err != nil {
		return p, err
	}
	keep := max(d.Keep, 1)
	for _, n := range names[:max(len(names)-keep, 0)] {
		if err := os.Remove(filepath.Join(d.Path, n)); err != nil {
			return p, fmt.Errorf("trainstate: drop an old checkpoint: %w", err)
		}
	}
	return p, atomicfile.SyncDir(d.Path)
}

// LoadNewest returns the newest checkpoint of d that decodes, with its
// path, and one note per newer checkpoint that it skipped and why, for the
// caller to report. With none that loads it returns ErrNone, wrapping the
// reasons.
func (d Dir) LoadNewest() (s State, path string, skipped []string, err error) {
	names, err := d.List()
	if err != nil {
		return State{}, "", nil, err
	}
	for i := len(names) - 1; i >= 0; i-- {
		p := filepath.Join(d.Path, names[i])
		b, err := os.ReadFile(p)
		if err == nil {
			s, err = Decode(b)
		}
		if err == nil {
			return s, p, skipped, nil
		}
		skipped = append(skipped, fmt.Sprintf("%s: %v", p, err))
	}
	if len(skipped) == 0 {
		return State{}, "", nil, fmt.Errorf("%w in %s", ErrNone, d.Path)
	}
	return State{}, "", skipped, fmt.Errorf("%w in %s: %s", ErrNone, d.Path, strings.Join(skipped, "; "))
}

// AppendFloat32s appends v to b as little-endian float32 bits, the
// encoding of a section of float32 values.
func AppendFloat32s(b []byte, v []float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// ReadFloat32s fills dst from the front of b (AppendFloat32s's encoding)
// and returns the rest; b holds at least 4·len(dst) bytes.
func ReadFloat32s(dst []float32, b []byte) []byte {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return b[4*len(dst):]
}
