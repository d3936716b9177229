package bench

// The seed's C++ K-ary sum tree (seed 000; K = 16, float32 leaves and
// sums), batch 128 at 1M slots, as recorded in ../shared/DESIGN.md,
// "Reference figures measured on this kind of machine": measured on the
// project's 2-core reference machine alternating with herd in one
// session. These are recorded figures quoted for comparison, not
// re-measured by `herd bench replay` (the C++ tree is not part of herd).
const (
	SeedFanout   = 16
	SeedCapacity = 1 << 20
	SeedBatch    = 128
	// SeedTreeSetNs is the C++ tree's tree_set: 0.71 µs per batch.
	SeedTreeSetNs = 710.0
	// SeedTreeSampleNs is the C++ tree's tree_sample: 18.6 µs per batch.
	SeedTreeSampleNs = 18600.0
)

// SeedSource names where the Seed figures come from, for printing.
const SeedSource = "DESIGN.md"

// SeedNote is the line printed above the comparison table.
const SeedNote = "# seed C++ tree (K=16, float32): recorded figures quoted from DESIGN.md, not re-measured; herd_over_seed < 1: herd faster"

// SeedRow sets one of herd's measured tree rows beside the seed's
// recorded C++ figure for the same op: Ratio is herd_ns / seed_ns (below
// 1: herd is faster).
type SeedRow struct {
	Op         string  `json:"op"`
	Fanout     int     `json:"herd_fanout"`
	HerdNs     float64 `json:"herd_ns_per_op"`
	SeedFanout int     `json:"seed_fanout"`
	SeedNs     float64 `json:"seed_ns_recorded"`
	Ratio      float64 `json:"herd_over_seed"`
	Source     string  `json:"seed_source"`
}

// SeedRows returns a SeedRow for every tree_set and tree_sample row taken
// at the seed's capacity and batch; rows of other sizes have no recorded
// counterpart and are skipped.
func SeedRows(rows []Row) []SeedRow {
	var out []SeedRow
	for _, r := range rows {
		if r.Variant != "tree" || r.Capacity != SeedCapacity || r.Batch != SeedBatch {
			continue
		}
		var seed float64
		switch r.Op {
		case "tree_set":
			seed = SeedTreeSetNs
		case "tree_sample":
			seed = SeedTreeSampleNs
		default:
			continue
		}
		out = append(out, SeedRow{Op: r.Op, Fanout: r.Fanout, HerdNs: r.NsPerOp, SeedFanout: SeedFanout,
			SeedNs: seed, Ratio: r.NsPerOp / seed, Source: SeedSource})
	}
	return out
}
