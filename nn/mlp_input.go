package nn

import "herd/internal/scratch"

// Input returns the buffer Forward copies its input into, sized for batch
// rows of In values, valid until the next Forward or Reserve. A caller
// that writes the next Forward's input straight into it — a chain of
// one-layer MLPs putting each activation where the next layer reads it —
// saves Forward's copy, which is skipped when the slice is the buffer
// itself.
func (m *MLP) Input(batch int) []float32 {
	m.x = scratch.Resize(m.x, batch*m.cfg.In)
	return m.x
}
