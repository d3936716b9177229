package sumtree

// Specialised descents, one per fanout. The group is taken as a fixed-size
// array pointer, so the compiler drops the bounds checks.
//
// The in-group scan is hierarchical and branch-free: the group is cut into
// blocks (quads, or blocks of 16 for K ≥ 32) whose sums are independent
// (they pipeline instead of forming one K-long chain of dependent adds), the
// block is chosen by counting the block prefix sums ≤ the target, then the
// child inside the block the same way. Counting compiles to SETcc, so no
// branch depends on the data. A target at or past the group's sum
// (rounding) would pick a zero child; a rarely taken branch replaces it by
// the last positive child. An inner node holding only rounding residue is
// caught at the leaf (see Tree.find).

func descend2[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 1
		g := (*[2]F)(lv[base : base+2])
		x := u[b]
		j := b2i(float64(g[0]) <= x)
		pre := [2]float64{0, float64(g[0])}
		before := pre[j&1]
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}

func descend4[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 2
		g := (*[4]F)(lv[base : base+4])
		x := u[b]
		d0 := float64(g[0])
		d1 := d0 + float64(g[0+1])
		d2 := d1 + float64(g[0+2])
		j := b2i(d0 <= x) + b2i(d1 <= x) + b2i(d2 <= x)
		pre4 := [4]float64{0, d0, d1, d2}
		j &= 3
		before := pre4[j]
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}

func descend8[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 3
		g := (*[8]F)(lv[base : base+8])
		x := u[b]
		h0 := (float64(g[0]) + float64(g[1])) + (float64(g[2]) + float64(g[3]))
		jh := b2i(h0 <= x) & 1
		preh := [2]float64{0, h0}
		xh := x - preh[jh]
		d0 := float64(g[jh*4])
		d1 := d0 + float64(g[jh*4+1])
		d2 := d1 + float64(g[jh*4+2])
		j4 := b2i(d0 <= xh) + b2i(d1 <= xh) + b2i(d2 <= xh)
		pre4 := [4]float64{0, d0, d1, d2}
		j4 &= 3
		b4 := pre4[j4]
		j := jh*4 + j4
		before := preh[jh] + b4
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}

// scan8 picks the child of a group of 8 whose prefix range holds x and
// returns it with the mass of the children before it: descend8's scan, for
// descendShared8. descend8 keeps its own inline copy because the compiler
// does not inline scan8, and a call per level is a visible share of
// tree_sample.
func scan8(g *[8]float64, x float64) (int, float64) {
	h0 := (g[0] + g[1]) + (g[2] + g[3])
	jh := b2i(h0 <= x) & 1
	preh := [2]float64{0, h0}
	xh := x - preh[jh]
	d0 := g[jh*4]
	d1 := d0 + g[jh*4+1]
	d2 := d1 + g[jh*4+2]
	j4 := b2i(d0 <= xh) + b2i(d1 <= xh) + b2i(d2 <= xh)
	pre4 := [4]float64{0, d0, d1, d2}
	j4 &= 3
	j := jh*4 + j4
	before := preh[jh] + pre4[j4]
	if g[j&7] <= 0 {
		// Rare: a target at or past the group's sum (rounding) picked a
		// zero child, maybe padding; take the last positive one.
		return lastPositive(g[:])
	}
	return j, before
}

func descend16[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 4
		g := (*[16]F)(lv[base : base+16])
		x := u[b]
		q0 := (float64(g[0+0]) + float64(g[0+1])) + (float64(g[0+2]) + float64(g[0+3]))
		q1 := (float64(g[0+4]) + float64(g[0+5])) + (float64(g[0+6]) + float64(g[0+7]))
		q2 := (float64(g[0+8]) + float64(g[0+9])) + (float64(g[0+10]) + float64(g[0+11]))
		c1 := q0 + q1
		c2 := c1 + q2
		jq := b2i(q0 <= x) + b2i(c1 <= x) + b2i(c2 <= x)
		pre := [4]float64{0, q0, c1, c2}
		jq &= 3
		x16 := x - pre[jq]
		d0 := float64(g[0+jq*4])
		d1 := d0 + float64(g[0+jq*4+1])
		d2 := d1 + float64(g[0+jq*4+2])
		j4 := b2i(d0 <= x16) + b2i(d1 <= x16) + b2i(d2 <= x16)
		pre4 := [4]float64{0, d0, d1, d2}
		j4 &= 3
		b4 := pre4[j4]
		j := jq*4 + j4
		before := pre[jq] + b4
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}

func descend32[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 5
		g := (*[32]F)(lv[base : base+32])
		x := u[b]
		h0 := (float64(g[0+0]) + float64(g[0+1]) + float64(g[0+2]) + float64(g[0+3])) + (float64(g[0+4]) + float64(g[0+5]) + float64(g[0+6]) + float64(g[0+7])) + (float64(g[0+8]) + float64(g[0+9]) + float64(g[0+10]) + float64(g[0+11])) + (float64(g[0+12]) + float64(g[0+13]) + float64(g[0+14]) + float64(g[0+15]))
		jh := b2i(h0 <= x) & 1
		preh := [2]float64{0, h0}
		xh := x - preh[jh]
		q0 := (float64(g[jh*16+0]) + float64(g[jh*16+1])) + (float64(g[jh*16+2]) + float64(g[jh*16+3]))
		q1 := (float64(g[jh*16+4]) + float64(g[jh*16+5])) + (float64(g[jh*16+6]) + float64(g[jh*16+7]))
		q2 := (float64(g[jh*16+8]) + float64(g[jh*16+9])) + (float64(g[jh*16+10]) + float64(g[jh*16+11]))
		c1 := q0 + q1
		c2 := c1 + q2
		jq := b2i(q0 <= xh) + b2i(c1 <= xh) + b2i(c2 <= xh)
		pre := [4]float64{0, q0, c1, c2}
		jq &= 3
		x16 := xh - pre[jq]
		d0 := float64(g[jh*16+jq*4])
		d1 := d0 + float64(g[jh*16+jq*4+1])
		d2 := d1 + float64(g[jh*16+jq*4+2])
		j4 := b2i(d0 <= x16) + b2i(d1 <= x16) + b2i(d2 <= x16)
		pre4 := [4]float64{0, d0, d1, d2}
		j4 &= 3
		b4 := pre4[j4]
		j16 := jq*4 + j4
		b16 := pre[jq] + b4
		j := jh*16 + j16
		before := preh[jh] + b16
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}

func descend64[F leaf](lv []F, node []int, u []float64) {
	u = u[:len(node)]
	for b, i := range node {
		base := i << 6
		g := (*[64]F)(lv[base : base+64])
		x := u[b]
		h0 := (float64(g[0+0]) + float64(g[0+1]) + float64(g[0+2]) + float64(g[0+3])) + (float64(g[0+4]) + float64(g[0+5]) + float64(g[0+6]) + float64(g[0+7])) + (float64(g[0+8]) + float64(g[0+9]) + float64(g[0+10]) + float64(g[0+11])) + (float64(g[0+12]) + float64(g[0+13]) + float64(g[0+14]) + float64(g[0+15]))
		h1 := (float64(g[16+0]) + float64(g[16+1]) + float64(g[16+2]) + float64(g[16+3])) + (float64(g[16+4]) + float64(g[16+5]) + float64(g[16+6]) + float64(g[16+7])) + (float64(g[16+8]) + float64(g[16+9]) + float64(g[16+10]) + float64(g[16+11])) + (float64(g[16+12]) + float64(g[16+13]) + float64(g[16+14]) + float64(g[16+15]))
		h2 := (float64(g[32+0]) + float64(g[32+1]) + float64(g[32+2]) + float64(g[32+3])) + (float64(g[32+4]) + float64(g[32+5]) + float64(g[32+6]) + float64(g[32+7])) + (float64(g[32+8]) + float64(g[32+9]) + float64(g[32+10]) + float64(g[32+11])) + (float64(g[32+12]) + float64(g[32+13]) + float64(g[32+14]) + float64(g[32+15]))
		e1 := h0 + h1
		e2 := e1 + h2
		jh := (b2i(h0 <= x) + b2i(e1 <= x) + b2i(e2 <= x)) & 3
		preh := [4]float64{0, h0, e1, e2}
		xh := x - preh[jh]
		q0 := (float64(g[jh*16+0]) + float64(g[jh*16+1])) + (float64(g[jh*16+2]) + float64(g[jh*16+3]))
		q1 := (float64(g[jh*16+4]) + float64(g[jh*16+5])) + (float64(g[jh*16+6]) + float64(g[jh*16+7]))
		q2 := (float64(g[jh*16+8]) + float64(g[jh*16+9])) + (float64(g[jh*16+10]) + float64(g[jh*16+11]))
		c1 := q0 + q1
		c2 := c1 + q2
		jq := b2i(q0 <= xh) + b2i(c1 <= xh) + b2i(c2 <= xh)
		pre := [4]float64{0, q0, c1, c2}
		jq &= 3
		x16 := xh - pre[jq]
		d0 := float64(g[jh*16+jq*4])
		d1 := d0 + float64(g[jh*16+jq*4+1])
		d2 := d1 + float64(g[jh*16+jq*4+2])
		j4 := b2i(d0 <= x16) + b2i(d1 <= x16) + b2i(d2 <= x16)
		pre4 := [4]float64{0, d0, d1, d2}
		j4 &= 3
		b4 := pre4[j4]
		j16 := jq*4 + j4
		b16 := pre[jq] + b4
		j := jh*16 + j16
		before := preh[jh] + b16
		if g[j&(len(g)-1)] <= 0 {
			// Rare: a target at or past the group's sum (rounding) picked
			// a zero child, maybe padding; take the last positive one.
			j, before = lastPositive(g[:])
		}
		node[b] = base + j
		u[b] = x - before
	}
}
