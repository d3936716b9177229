package transport

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// ErrChunk marks a learner's contribution whose chunks cannot be put back
// together: one stayed missing, or they disagree on the whole (count,
// size, checksum) or on their own lengths.
var ErrChunk = errors.New("dist: contribution chunks")

// A contribution over the connection's max payload goes out as n chunks
// of even size, each with a Herd-Chunk header "k n total crc": its index,
// the chunk count, the contribution's length and the CRC-32C of the whole
// contribution, which the receiver checks once every chunk is in, so a
// chunk of another message (a resend of a different contribution to the
// same round) is caught rather than learned from.
const gatherChunk = "Herd-Chunk"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkHeader describes chunk k of a contribution of n chunks.
type chunkHeader struct {
	k, n, total int
	crc         uint32
}

func (h chunkHeader) String() string {
	return fmt.Sprintf("%d %d %d %d", h.k, h.n, h.total, h.crc)
}

// chunkSize is the length of every chunk but the last of a contribution
// of total bytes cut into n.
func chunkSize(total, n int) int { return (total + n - 1) / n }

// splitChunks cuts b into the fewest chunks of at most limit bytes, all but the
// last of one size, and returns them with their headers; a b that fits
// is one chunk, sent without a header.
func splitChunks(b []byte, limit int) ([][]byte, []chunkHeader) {
	if len(b) <= limit {
		return [][]byte{b}, nil
	}
	n := (len(b) + limit - 1) / limit
	size := chunkSize(len(b), n)
	crc := crc32.Checksum(b, castagnoli)
	parts := make([][]byte, n)
	hs := make([]chunkHeader, n)
	for k := range n {
		parts[k] = b[k*size : min((k+1)*size, len(b))]
		hs[k] = chunkHeader{k: k, n: n, total: len(b), crc: crc}
	}
	return parts, hs
}

// parseChunk reads a Herd-Chunk header.
func parseChunk(s string) (chunkHeader, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return chunkHeader{}, fmt.Errorf("%w: header %q", ErrChunk, s)
	}
	var v [4]uint64
	for i, x := range f {
		var err error
		if v[i], err = strconv.ParseUint(x, 10, 32); err != nil {
			return chunkHeader{}, fmt.Errorf("%w: header %q: %w", ErrChunk, s, err)
		}
	}
	h := chunkHeader{k: int(v[0]), n: int(v[1]), total: int(v[2]), crc: uint32(v[3])}
	if h.n < 2 || h.k >= h.n || h.total < h.n {
		return chunkHeader{}, fmt.Errorf("%w: header %q: chunk %d of %d of a %d-byte contribution", ErrChunk, s, h.k, h.n, h.total)
	}
	return h, nil
}

// assembly puts one member's chunked contribution to one round back
// together.
type assembly struct {
	first chunkHeader // of the first chunk to arrive
	buf   []byte
	have  []bool
	left  int
}

func newAssembly(h chunkHeader) *assembly {
	return &assembly{first: h, buf: make([]byte, h.total), have: make([]bool, h.n), left: h.n}
}

// add places chunk h with data d. It returns the contribution once every
// chunk is in, and an ErrChunk when h or d disagrees with the chunks
// before it or the whole fails its checksum. A chunk that came before (a
// resend) is ignored.
func (a *assembly) add(h chunkHeader, d []byte) ([]byte, error) {
	if h.n != a.first.n || h.total != a.first.total || h.crc != a.first.crc {
		return nil, fmt.Errorf("%w: chunk %d says %d chunks of a %d-byte contribution (crc %08x), chunk %d said %d of %d bytes (crc %08x)",
			ErrChunk, h.k, h.n, h.total, h.crc, a.first.k, a.first.n, a.first.total, a.first.crc)
	}
	size := chunkSize(h.total, h.n)
	off := h.k * size
	if want := min(size, h.total-off); len(d) != want {
		return nil, fmt.Errorf("%w: chunk %d of %d holds %d bytes, want %d", ErrChunk, h.k, h.n, len(d), want)
	}
	if a.have[h.k] {
		return nil, nil
	}
	copy(a.buf[off:], d)
	a.have[h.k] = true
	if a.left--; a.left > 0 {
		return nil, nil
	}
	if crc := crc32.Checksum(a.buf, castagnoli); crc != h.crc {
		return nil, fmt.Errorf("%w: the %d chunks of a %d-byte contribution have crc %08x, want %08x", ErrChunk, h.n, h.total, crc, h.crc)
	}
	return a.buf, nil
}

// missing is the indices of the chunks not yet in.
func (a *assembly) missing() []int {
	var m []int
	for k, ok := range a.have {
		if !ok {
			m = append(m, k)
		}
	}
	return m
}
