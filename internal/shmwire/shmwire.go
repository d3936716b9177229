package shmwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// Socket bytes.
const (
	Msg     = 'P'
	Map     = 'M'
	FD      = 'F'
	Mapped  = 'm'
	Step    = 'S'
	Stepped = 's'
	// WantPipes answers Map, instead of Mapped, to a client whose
	// segment header sets FlagPipes: send the wake pipes (an FD byte
	// with two descriptors), then read Mapped and everything after it on
	// them.
	WantPipes = 'w'
)

// Flags is the header's flags word (little-endian uint32) the client
// writes; a server ignores bits it does not know, so a client can offer
// and an older server decline by answering Mapped.
const (
	Flags = 20
	// FlagPipes offers wake pipes: after Map, the session's bytes
	// (Step, Stepped, Msg frames) travel on two pipes the client makes,
	// the read end of one and the write end of the other sent to the
	// server, instead of on the socket. A pipe byte costs both sides less
	// than a socket byte (no socket buffer), and as each side holds the
	// only copy of the write end it reads from the other, a peer's death
	// still ends a blocked read with EOF at once.
	FlagPipes = 1
)

const (
	// Magic starts every segment; its last character is the layout's
	// version. A peer that finds another version ends the session with
	// an error saying so (CheckHeader).
	Magic = "HERDSHM2"
	// magicStem is Magic without its version character.
	magicStem = "HERDSHM"
	// MaxFrame bounds a frame's length.
	MaxFrame = 64 << 20
	// MaxDim bounds n, the obs dim and the action dim of a segment.
	MaxDim = 1 << 24
)

// ErrFrame is a malformed frame or segment header.
var ErrFrame = errors.New("shmwire: malformed")

// CheckName refuses a shm name that clients could not reach: the name is
// the host of their env id shm://NAME/ID, so it must be one whole, plain
// URL host (no '/', ':', '@', '?' or spaces).
func CheckName(name string) error {
	if name == "" {
		return errors.New("empty shm name")
	}
	u, err := url.Parse("shm://" + name + "/ID")
	if err != nil || u.Host != name || u.Path != "/ID" || strings.ContainsAny(name, ":@") {
		return fmt.Errorf("shm name %q: clients could not reach it as shm://NAME/ID; use letters, digits, '.', '-' and '_'", name)
	}
	return nil
}

// SocketName is the abstract Unix-domain socket of shm name (Go's "@"
// spelling of the leading NUL byte).
func SocketName(name string) string { return "@herd-env-" + name }

// ObsSize is the header offset of the observation values' size in bytes
// (little-endian uint32): 4 for float32, 1 for uint8 (a session whose open
// answer set obs_u8).
const ObsSize = 32

// NoLives fills the lives array of envs whose infos report none.
const NoLives = -1

// Layout is where each array of a segment for n envs lives (byte offsets).
type Layout struct {
	N, ObsDim, ActDim int
	// ObsBytes is the size of one observation value: 4 (float32) or 1
	// (uint8).
	ObsBytes                                       int
	Act, Obs, Final, Rew, Lives, Term, Trunc, Size int
}

func align8(x int) int { return (x + 7) &^ 7 }

// NewLayout returns the layout for n envs of the given dims (each at most
// MaxDim), observations one byte a value when u8, else float32.
func NewLayout(n, obsDim, actDim int, u8 bool) Layout {
	l := Layout{N: n, ObsDim: obsDim, ActDim: actDim, ObsBytes: 4}
	if u8 {
		l.ObsBytes = 1
	}
	l.Act = 64
	l.Obs = l.Act + align8(4*n*actDim)
	l.Final = l.Obs + align8(l.ObsBytes*n*obsDim)
	l.Rew = l.Final + align8(l.ObsBytes*n*obsDim)
	l.Lives = l.Rew + 8*n
	l.Term = l.Lives + align8(4*n)
	l.Trunc = l.Term + align8(n)
	l.Size = (l.Trunc + align8(n) + 4095) &^ 4095
	return l
}

// WriteHeader writes the header into a mapped segment.
func (l Layout) WriteHeader(mem []byte) {
	copy(mem, Magic)
	binary.LittleEndian.PutUint32(mem[8:], uint32(l.N))
	binary.LittleEndian.PutUint32(mem[12:], uint32(l.ObsDim))
	binary.LittleEndian.PutUint32(mem[16:], uint32(l.ActDim))
	binary.LittleEndian.PutUint32(mem[ObsSize:], uint32(l.ObsBytes))
}

// CheckHeader reports whether mem is a segment of this layout; a segment
// of another layout version says which.
func (l Layout) CheckHeader(mem []byte) error {
	if len(mem) >= len(Magic) && string(mem[:len(magicStem)]) == magicStem && string(mem[:len(Magic)]) != Magic {
		return fmt.Errorf("%w: segment layout %q, this side speaks %q: run the same herd version (herd_env and herd) on both sides", ErrFrame, mem[:len(Magic)], Magic)
	}
	if len(mem) < l.Size || string(mem[:8]) != Magic ||
		binary.LittleEndian.Uint32(mem[8:]) != uint32(l.N) ||
		binary.LittleEndian.Uint32(mem[12:]) != uint32(l.ObsDim) ||
		binary.LittleEndian.Uint32(mem[16:]) != uint32(l.ActDim) ||
		binary.LittleEndian.Uint32(mem[ObsSize:]) != uint32(l.ObsBytes) {
		return fmt.Errorf("%w: segment header does not match the session (%d envs, obs %d of %d bytes a value, action %d)", ErrFrame, l.N, l.ObsDim, l.ObsBytes, l.ActDim)
	}
	return nil
}

// Step counters in the header (little-endian uint32, at 4-byte aligned
// offsets): the client stores its step count at ReqSeq before sending Step,
// and the server copies it to RespSeq once the results are in the segment,
// before sending Stepped. They only let either side spin a few µs on the
// memory before blocking on a read (SpinFor); the pipe (or socket) bytes
// stay the protocol, so a peer that never writes them is merely not waited for.
const (
	ReqSeq  = 24
	RespSeq = 28
)

// SpinFor is how long the Go client watches RespSeq before it blocks for
// the Stepped byte by default: none. With Python's server on the 2-core VM
// (2026-11-26, a server process per case, both sides spinning alike), a
// 1-env step took a median 11–15 µs without a spin, 12.5–17 with 3 µs and
// 12–17 with 5 µs idle, so a spin buys nothing there; with two busy loops,
// 12–30, 11–17 and 12–17 µs; at load 8–13, 23–54 without, 24–33 with 3 µs
// and 48–135 with 8 µs: a spinner holds a core the other side needs.
// `shm://…?spin=D` turns it on per client; service/envsvc's
// BenchmarkRemoteVectorStepPython (shm-spin3us, shm-spin5us) measures it on
// a machine.
const SpinFor time.Duration = 0

// After SpinMisses spins in a row that missed the answer, a side spins
// only on every SpinProbe-th step until one catches it again, so that a
// slow env (or a peer that does not count) costs almost no spinning.
const (
	SpinMisses = 4
	SpinProbe  = 16
)

// Seq returns the header's counter at off (ReqSeq or RespSeq), for atomic
// loads and stores.
func Seq(mem []byte, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&mem[off]))
}

// Views are a segment's arrays, aliasing the mapped memory. Obs and Final
// are set in a float32 layout, ObsU8 and FinalU8 in a uint8 one.
type Views struct {
	Act, Obs, Final []float32
	ObsU8, FinalU8  []byte
	Rew             []float64
	// Lives holds each env's lives after the step (ALE's info["lives"]),
	// NoLives for all when the envs report none.
	Lives       []int32
	Term, Trunc []byte
}

// Views returns the arrays of a mapped segment of at least l.Size bytes.
func (l Layout) Views(mem []byte) Views {
	v := Views{
		Act:   f32s(mem, l.Act, l.N*l.ActDim),
		Rew:   unsafe.Slice((*float64)(unsafe.Pointer(&mem[l.Rew])), l.N),
		Lives: unsafe.Slice((*int32)(unsafe.Pointer(&mem[l.Lives])), l.N),
		Term:  mem[l.Term : l.Term+l.N],
		Trunc: mem[l.Trunc : l.Trunc+l.N],
	}
	if k := l.N * l.ObsDim; l.ObsBytes == 1 {
		v.ObsU8, v.FinalU8 = mem[l.Obs:l.Obs+k], mem[l.Final:l.Final+k]
	} else {
		v.Obs, v.Final = f32s(mem, l.Obs, k), f32s(mem, l.Final, k)
	}
	return v
}

func f32s(mem []byte, off, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), n)
}

// WriteMsg writes Msg and m's frame in one write.
func WriteMsg(w io.Writer, m proto.Message) error {
	body, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	frame := make([]byte, 5+len(body))
	frame[0] = Msg
	binary.LittleEndian.PutUint32(frame[1:], uint32(len(body)))
	copy(frame[5:], body)
	_, err = w.Write(frame)
	return err
}

// ReadFrame reads a frame (after its Msg byte) into m.
func ReadFrame(r io.Reader, m proto.Message) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size > MaxFrame {
		return fmt.Errorf("%w: frame of %d bytes", ErrFrame, size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return fmt.Errorf("%w: %v", ErrFrame, err)
	}
	return nil
}
