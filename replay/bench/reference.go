package bench

// The reference C++ K-ary sum tree of PAL (Zhang, Kuppannagari and
// Prasanna 2021, "Parallel Actors and Learners"; K = 16, float32 leaves
// and sums), batch 128 at 1M slots, measured on the project's 2-core
// reference machine alternating with herd in one session and recorded in
// docs/BENCHMARKS.md ("Replay"). These are recorded figures quoted for
// comparison, not re-measured by `herd bench replay` (the C++ tree is not
// part of herd).
const (
	RefFanout   = 16
	RefCapacity = 1 << 20
	RefBatch    = 128
	// RefTreeSetNs is the C++ tree's tree_set: 0.71 µs per batch.
	RefTreeSetNs = 710.0
	// RefTreeSampleNs is the C++ tree's tree_sample: 18.6 µs per batch.
	RefTreeSampleNs = 18600.0
)

// RefSource names where the reference figures are recorded, for printing.
const RefSource = "docs/BENCHMARKS.md"

// RefNote is the line printed above the comparison table.
const RefNote = "# PAL's C++ tree (K=16, float32): recorded figures (docs/BENCHMARKS.md), not re-measured; herd_over_ref < 1: herd faster"

// RefRow sets one of herd's measured tree rows beside the reference
// tree's recorded figure for the same op: Ratio is herd_ns / ref_ns (below
// 1: herd is faster).
type RefRow struct {
	Op        string  `json:"op"`
	Fanout    int     `json:"herd_fanout"`
	HerdNs    float64 `json:"herd_ns_per_op"`
	RefFanout int     `json:"ref_fanout"`
	RefNs     float64 `json:"ref_ns_recorded"`
	Ratio     float64 `json:"herd_over_ref"`
	Source    string  `json:"ref_source"`
}

// RefRows returns a RefRow for every tree_set and tree_sample row taken
// at the reference's capacity and batch; rows of other sizes have no
// recorded counterpart and are skipped.
func RefRows(rows []Row) []RefRow {
	var out []RefRow
	for _, r := range rows {
		if r.Variant != "tree" || r.Capacity != RefCapacity || r.Batch != RefBatch {
			continue
		}
		var ref float64
		switch r.Op {
		case "tree_set":
			ref = RefTreeSetNs
		case "tree_sample":
			ref = RefTreeSampleNs
		default:
			continue
		}
		out = append(out, RefRow{Op: r.Op, Fanout: r.Fanout, HerdNs: r.NsPerOp, RefFanout: RefFanout,
			RefNs: ref, Ratio: r.NsPerOp / ref, Source: RefSource})
	}
	return out
}
