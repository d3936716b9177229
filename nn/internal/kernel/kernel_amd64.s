//go:build amd64 && !purego

#include "textflag.h"

// Micro-kernels for C(4×16) = op(A)(4×k)·B(k×16), AVX2 + FMA.
//
// Accumulators: Y0..Y7 hold the 4×16 tile of C (row r in Y(2r), Y(2r+1)).
// Per step p: two 8-wide loads of B's row p, four broadcasts of A(r, p),
// eight FMAs. A rows are given as four base pointers with a common byte
// stride csa between consecutive p, which covers both A (csa = 4) and Aᵀ
// (csa = 4·lda); duplicated row pointers handle m % 4 without a second
// kernel. B advances by ldb bytes per p.
//
// flags: bit 0 = accumulate into C (load C first), bit 1 = ReLU at the end.
// Without bit 0 the tile starts from bias (16 floats) or, if bias is nil,
// from zero.

// ZERO8 clears the accumulators Y0..Y7.
#define ZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// RELU8 applies max(·, 0) to Y0..Y7 (Y8 is clobbered).
#define RELU8 \
	VXORPS Y8, Y8, Y8; \
	VMAXPS Y8, Y0, Y0; \
	VMAXPS Y8, Y1, Y1; \
	VMAXPS Y8, Y2, Y2; \
	VMAXPS Y8, Y3, Y3; \
	VMAXPS Y8, Y4, Y4; \
	VMAXPS Y8, Y5, Y5; \
	VMAXPS Y8, Y6, Y6; \
	VMAXPS Y8, Y7, Y7

// func kern4x16(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int)
TEXT ·kern4x16(SB), NOSPLIT, $0-112
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ csa+40(FP), R10
	MOVQ b+48(FP), DX
	MOVQ ldb+56(FP), R11
	MOVQ bias+96(FP), AX
	MOVQ flags+104(FP), R12

	TESTQ $1, R12
	JNZ  loadc
	TESTQ AX, AX
	JZ   zero
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y1, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y1, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	JMP  start

zero:
	ZERO8
	JMP  start

loadc:
	MOVQ c0+64(FP), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	MOVQ c1+72(FP), AX
	VMOVUPS (AX), Y2
	VMOVUPS 32(AX), Y3
	MOVQ c2+80(FP), AX
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	MOVQ c3+88(FP), AX
	VMOVUPS (AX), Y6
	VMOVUPS 32(AX), Y7

start:
	XORQ BX, BX
	TESTQ CX, CX
	JZ   done

loop:
	VMOVUPS (DX), Y8
	VMOVUPS 32(DX), Y9
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (R8)(BX*1), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VBROADCASTSS (R9)(BX*1), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	JNZ  loop

done:
	TESTQ $2, R12
	JZ   store
	RELU8

store:
	MOVQ c0+64(FP), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	MOVQ c1+72(FP), AX
	VMOVUPS Y2, (AX)
	VMOVUPS Y3, 32(AX)
	MOVQ c2+80(FP), AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	MOVQ c3+88(FP), AX
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	VZEROUPPER
	RET

// kern4x16m is kern4x16 for the last n % 16 columns: every access to B,
// C and bias is masked to the first ncols lanes (VMASKMOVPS never touches
// masked-out memory, so nothing past the slices is read or written).
//
// func kern4x16m(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)
TEXT ·kern4x16m(SB), NOSPLIT, $0-120
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ csa+40(FP), R10
	MOVQ b+48(FP), DX
	MOVQ ldb+56(FP), R11
	MOVQ bias+96(FP), AX
	MOVQ flags+104(FP), R12
	MOVQ ncols+112(FP), R13

	// masks: lane i of Y14 set iff i < ncols, of Y15 iff i+8 < ncols.
	LEAQ masktab<>(SB), R14
	MOVQ $16, R15
	SUBQ R13, R15
	VMOVDQU (R14)(R15*4), Y14
	VMOVDQU 32(R14)(R15*4), Y15

	TESTQ $1, R12
	JNZ  mloadc
	TESTQ AX, AX
	JZ   mzero
	VMASKMOVPS (AX), Y14, Y0
	VMASKMOVPS 32(AX), Y15, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y1, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y1, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	JMP  mstart

mzero:
	ZERO8
	JMP  mstart

mloadc:
	MOVQ c0+64(FP), AX
	VMASKMOVPS (AX), Y14, Y0
	VMASKMOVPS 32(AX), Y15, Y1
	MOVQ c1+72(FP), AX
	VMASKMOVPS (AX), Y14, Y2
	VMASKMOVPS 32(AX), Y15, Y3
	MOVQ c2+80(FP), AX
	VMASKMOVPS (AX), Y14, Y4
	VMASKMOVPS 32(AX), Y15, Y5
	MOVQ c3+88(FP), AX
	VMASKMOVPS (AX), Y14, Y6
	VMASKMOVPS 32(AX), Y15, Y7

mstart:
	XORQ BX, BX
	TESTQ CX, CX
	JZ   mdone

mloop:
	VMASKMOVPS (DX), Y14, Y8
	VMASKMOVPS 32(DX), Y15, Y9
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (R8)(BX*1), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VBROADCASTSS (R9)(BX*1), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	JNZ  mloop

mdone:
	TESTQ $2, R12
	JZ   mstore
	RELU8

mstore:
	MOVQ c0+64(FP), AX
	VMASKMOVPS Y0, Y14, (AX)
	VMASKMOVPS Y1, Y15, 32(AX)
	MOVQ c1+72(FP), AX
	VMASKMOVPS Y2, Y14, (AX)
	VMASKMOVPS Y3, Y15, 32(AX)
	MOVQ c2+80(FP), AX
	VMASKMOVPS Y4, Y14, (AX)
	VMASKMOVPS Y5, Y15, 32(AX)
	MOVQ c3+88(FP), AX
	VMASKMOVPS Y6, Y14, (AX)
	VMASKMOVPS Y7, Y15, 32(AX)
	VZEROUPPER
	RET


// kern1x64 computes one row of C over 64 columns: eight accumulators
// Y0..Y7, per p one broadcast of A(0, p) and eight loads of B's row p. It
// is the batch-1 (actor inference) path: the 4×16 kernel with duplicated
// rows would be latency-bound there. The summation order per element is
// the same as kern4x16's (bias, then p = 0, 1, … with FMA), so a row gets
// the same bits whichever kernel computes it.
//
// func kern1x64(k int, a *float32, csa int, b *float32, ldb int, c *float32, bias *float32, flags int)
TEXT ·kern1x64(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ csa+16(FP), R10
	MOVQ b+24(FP), DX
	MOVQ ldb+32(FP), R11
	MOVQ c+40(FP), DI
	MOVQ bias+48(FP), AX
	MOVQ flags+56(FP), R12

	TESTQ $1, R12
	JNZ  k1loadc
	TESTQ AX, AX
	JZ   k1zero
	VMOVUPS 0(AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	VMOVUPS 128(AX), Y4
	VMOVUPS 160(AX), Y5
	VMOVUPS 192(AX), Y6
	VMOVUPS 224(AX), Y7
	JMP  k1start

k1zero:
	ZERO8
	JMP  k1start

k1loadc:
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7

k1start:
	TESTQ CX, CX
	JZ   k1done

k1loop:
	VBROADCASTSS (SI), Y15
	VFMADD231PS 0(DX), Y15, Y0
	VFMADD231PS 32(DX), Y15, Y1
	VFMADD231PS 64(DX), Y15, Y2
	VFMADD231PS 96(DX), Y15, Y3
	VFMADD231PS 128(DX), Y15, Y4
	VFMADD231PS 160(DX), Y15, Y5
	VFMADD231PS 192(DX), Y15, Y6
	VFMADD231PS 224(DX), Y15, Y7
	ADDQ R10, SI
	ADDQ R11, DX
	DECQ CX
	JNZ  k1loop

k1done:
	TESTQ $2, R12
	JZ   k1store
	RELU8

k1store:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VZEROUPPER
	RET


// kern2x8n computes a 2×ncols tile (ncols ≤ 8) for narrow matrices (n ≤ 8:
// output layers with a few actions or one value). A 1-row, 1-vector tile
// would be one FMA dependency chain of length k, latency-bound at batch 1,
// so each element is accumulated in four interleaved chains (p mod 4)
// that are summed at the end as (s0 + s1) + (s2 + s3), s0 starting from
// bias, C or zero. The order depends only on k, never on m, so a row's bits
// do not depend on the batch it is in. Accumulators: Y(4r+c) for row r,
// chain c. B, C and bias are accessed through the lane mask in Y14.
//
// func kern2x8n(k int, a0, a1 *float32, csa int, b *float32, ldb int, c0, c1 *float32, bias *float32, flags int, ncols int)
TEXT ·kern2x8n(SB), NOSPLIT, $0-88
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ csa+24(FP), R10
	MOVQ b+32(FP), DX
	MOVQ ldb+40(FP), R11
	MOVQ bias+64(FP), AX
	MOVQ flags+72(FP), R12
	MOVQ ncols+80(FP), R13

	LEAQ masktab<>(SB), R14
	MOVQ $16, R15
	SUBQ R13, R15
	VMOVDQU (R14)(R15*4), Y14

	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ $1, R12
	JNZ  nloadc
	TESTQ AX, AX
	JZ   nzero
	VMASKMOVPS (AX), Y14, Y0
	VMOVAPS Y0, Y4
	JMP  nstart

nzero:
	VXORPS Y0, Y0, Y0
	VXORPS Y4, Y4, Y4
	JMP  nstart

nloadc:
	MOVQ c0+48(FP), AX
	VMASKMOVPS (AX), Y14, Y0
	MOVQ c1+56(FP), AX
	VMASKMOVPS (AX), Y14, Y4

nstart:
	// BX walks A (bytes), R13 = k/4 groups, CX = k%4 leftovers.
	XORQ BX, BX
	MOVQ CX, R13
	SHRQ $2, R13
	ANDQ $3, CX
	TESTQ R13, R13
	JZ   nrest

nloop:
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y0
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y4
	ADDQ R10, BX
	ADDQ R11, DX
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y1
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y5
	ADDQ R10, BX
	ADDQ R11, DX
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y2
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y6
	ADDQ R10, BX
	ADDQ R11, DX
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y3
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y7
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ R13
	JNZ  nloop

nrest:
	TESTQ CX, CX
	JZ   nsum
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y0
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y4
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	TESTQ CX, CX
	JZ   nsum
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y1
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y5
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	TESTQ CX, CX
	JZ   nsum
	VMASKMOVPS (DX), Y14, Y8
	VBROADCASTSS (SI)(BX*1), Y10
	VFMADD231PS Y8, Y10, Y2
	VBROADCASTSS (DI)(BX*1), Y11
	VFMADD231PS Y8, Y11, Y6
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX

nsum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y6, Y4, Y4
	TESTQ $2, R12
	JZ   nstore
	VXORPS Y8, Y8, Y8
	VMAXPS Y8, Y0, Y0
	VMAXPS Y8, Y4, Y4

nstore:
	MOVQ c0+48(FP), AX
	VMASKMOVPS Y0, Y14, (AX)
	MOVQ c1+56(FP), AX
	VMASKMOVPS Y4, Y14, (AX)
	VZEROUPPER
	RET

// P2ROW: one row's four p of kern8x2p: A's a0..a3 spread to (a0 a0 a1 a1
// | a2 a2 a3 a3) by Y9, times B's four rows (Y8), into the row's chains.
#define P2ROW(areg, tmp, acc) \
	VBROADCASTF128 (areg)(BX*1), tmp; \
	VPERMILPS Y9, tmp, tmp; \
	VFMADD231PS Y8, tmp, acc

// P2TAIL: P2ROW for the k%4 leftover p, through the X15 lane mask.
#define P2TAIL(areg, acc) \
	LEAQ (areg)(BX*1), AX; \
	VMASKMOVPS (AX), X15, X10; \
	VINSERTF128 $1, X10, Y10, Y10; \
	VPERMILPS Y9, Y10, Y10; \
	VFMADD231PS Y8, Y10, acc

// P2SUM: (s0 + s1) + (s2 + s3) per column into the low two lanes.
#define P2SUM(acc, accx) \
	VPERMILPS $0x4E, acc, Y10; \
	VADDPS Y10, acc, acc; \
	VEXTRACTF128 $1, acc, X10; \
	VADDPS X10, accx, accx

// kern8x2p computes an 8×2 tile of C for n = 2 with contiguous rows of A
// and B (ldb = 2, csa = 1), bit for bit as kern2x8n does: four chains per
// element (p mod 4), chain 0 starting from bias, C or zero, summed as
// (s0 + s1) + (s2 + s3), then ReLU. Instead of one 8-lane register per
// chain with 2 lanes in use, one register holds all four chains of both
// columns, lane 2c+j for chain c, column j: four consecutive rows of B are
// exactly that layout, and A's four values are spread to it by a
// broadcast and an in-lane permute. Row r of A starts at a + r·rsa, row r
// of C at c + r·ldc (byte strides).
//
// func kern8x2p(k int, a *float32, rsa int, b *float32, c *float32, ldc int, bias *float32, flags int)
TEXT ·kern8x2p(SB), NOSPLIT, $0-64
	MOVQ flags+56(FP), AX
	TESTQ $1, AX
	JNZ  ploadc
	MOVQ bias+48(FP), AX
	TESTQ AX, AX
	JZ   pzero
	VMOVSD (AX), X0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y0, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y0, Y7
	JMP  pstart

pzero:
	ZERO8
	JMP  pstart

ploadc:
	MOVQ c+32(FP), AX
	MOVQ ldc+40(FP), BX
	VMOVSD (AX), X0
	ADDQ BX, AX
	VMOVSD (AX), X1
	ADDQ BX, AX
	VMOVSD (AX), X2
	ADDQ BX, AX
	VMOVSD (AX), X3
	ADDQ BX, AX
	VMOVSD (AX), X4
	ADDQ BX, AX
	VMOVSD (AX), X5
	ADDQ BX, AX
	VMOVSD (AX), X6
	ADDQ BX, AX
	VMOVSD (AX), X7

pstart:
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), AX
	MOVQ b+24(FP), DX
	LEAQ (SI)(AX*1), DI
	LEAQ (SI)(AX*2), R8
	LEAQ (DI)(AX*2), R9
	LEAQ (SI)(AX*4), R12
	LEAQ (DI)(AX*4), R13
	LEAQ (R8)(AX*4), R14
	LEAQ (R9)(AX*4), R15
	VMOVDQU spread<>(SB), Y9
	XORQ BX, BX
	MOVQ k+0(FP), CX
	SHRQ $2, CX
	JZ   ptail

ploop:
	VMOVUPS (DX), Y8
	P2ROW(SI, Y10, Y0)
	P2ROW(DI, Y11, Y1)
	P2ROW(R8, Y12, Y2)
	P2ROW(R9, Y13, Y3)
	P2ROW(R12, Y10, Y4)
	P2ROW(R13, Y11, Y5)
	P2ROW(R14, Y12, Y6)
	P2ROW(R15, Y13, Y7)
	ADDQ $16, BX
	ADDQ $32, DX
	DECQ CX
	JNZ  ploop

ptail:
	// The k%4 leftover p go to chains 0, 1, 2, from masked loads: the
	// other chains get +0·+0 added, which leaves them as they are, since
	// they started from +0 and a sum that starts from +0 is never −0
	// (chain 0, which may start from −0, always takes a leftover).
	MOVQ k+0(FP), CX
	ANDQ $3, CX
	JZ   psum
	LEAQ masktab<>(SB), AX
	MOVQ $16, R10
	SUBQ CX, R10
	VMOVDQU (AX)(R10*4), X15     // first k%4 lanes
	SUBQ CX, R10
	VMOVDQU (AX)(R10*4), Y14     // first 2·(k%4) lanes
	VMASKMOVPS (DX), Y14, Y8
	P2TAIL(SI, Y0)
	P2TAIL(DI, Y1)
	P2TAIL(R8, Y2)
	P2TAIL(R9, Y3)
	P2TAIL(R12, Y4)
	P2TAIL(R13, Y5)
	P2TAIL(R14, Y6)
	P2TAIL(R15, Y7)

psum:
	P2SUM(Y0, X0)
	P2SUM(Y1, X1)
	P2SUM(Y2, X2)
	P2SUM(Y3, X3)
	P2SUM(Y4, X4)
	P2SUM(Y5, X5)
	P2SUM(Y6, X6)
	P2SUM(Y7, X7)
	MOVQ flags+56(FP), AX
	TESTQ $2, AX
	JZ   pstore
	VXORPS X8, X8, X8
	VMAXPS X8, X0, X0
	VMAXPS X8, X1, X1
	VMAXPS X8, X2, X2
	VMAXPS X8, X3, X3
	VMAXPS X8, X4, X4
	VMAXPS X8, X5, X5
	VMAXPS X8, X6, X6
	VMAXPS X8, X7, X7

pstore:
	MOVQ c+32(FP), AX
	MOVQ ldc+40(FP), BX
	VMOVSD X0, (AX)
	ADDQ BX, AX
	VMOVSD X1, (AX)
	ADDQ BX, AX
	VMOVSD X2, (AX)
	ADDQ BX, AX
	VMOVSD X3, (AX)
	ADDQ BX, AX
	VMOVSD X4, (AX)
	ADDQ BX, AX
	VMOVSD X5, (AX)
	ADDQ BX, AX
	VMOVSD X6, (AX)
	ADDQ BX, AX
	VMOVSD X7, (AX)
	VZEROUPPER
	RET

// spread: the VPERMILPS control taking a broadcast (a0 a1 a2 a3 | a0 a1
// a2 a3) to (a0 a0 a1 a1 | a2 a2 a3 a3).
DATA spread<>+0(SB)/4, $0
DATA spread<>+4(SB)/4, $0
DATA spread<>+8(SB)/4, $1
DATA spread<>+12(SB)/4, $1
DATA spread<>+16(SB)/4, $2
DATA spread<>+20(SB)/4, $2
DATA spread<>+24(SB)/4, $3
DATA spread<>+28(SB)/4, $3
GLOBL spread<>(SB), RODATA|NOPTR, $32

// masktab: 16 all-ones lanes then 16 zero lanes; loading 8 lanes at
// index 16−ncols gives the first-ncols mask.
DATA masktab<>+0(SB)/4, $0xffffffff
DATA masktab<>+4(SB)/4, $0xffffffff
DATA masktab<>+8(SB)/4, $0xffffffff
DATA masktab<>+12(SB)/4, $0xffffffff
DATA masktab<>+16(SB)/4, $0xffffffff
DATA masktab<>+20(SB)/4, $0xffffffff
DATA masktab<>+24(SB)/4, $0xffffffff
DATA masktab<>+28(SB)/4, $0xffffffff
DATA masktab<>+32(SB)/4, $0xffffffff
DATA masktab<>+36(SB)/4, $0xffffffff
DATA masktab<>+40(SB)/4, $0xffffffff
DATA masktab<>+44(SB)/4, $0xffffffff
DATA masktab<>+48(SB)/4, $0xffffffff
DATA masktab<>+52(SB)/4, $0xffffffff
DATA masktab<>+56(SB)/4, $0xffffffff
DATA masktab<>+60(SB)/4, $0xffffffff
DATA masktab<>+64(SB)/4, $0x00000000
DATA masktab<>+68(SB)/4, $0x00000000
DATA masktab<>+72(SB)/4, $0x00000000
DATA masktab<>+76(SB)/4, $0x00000000
DATA masktab<>+80(SB)/4, $0x00000000
DATA masktab<>+84(SB)/4, $0x00000000
DATA masktab<>+88(SB)/4, $0x00000000
DATA masktab<>+92(SB)/4, $0x00000000
DATA masktab<>+96(SB)/4, $0x00000000
DATA masktab<>+100(SB)/4, $0x00000000
DATA masktab<>+104(SB)/4, $0x00000000
DATA masktab<>+108(SB)/4, $0x00000000
DATA masktab<>+112(SB)/4, $0x00000000
DATA masktab<>+116(SB)/4, $0x00000000
DATA masktab<>+120(SB)/4, $0x00000000
DATA masktab<>+124(SB)/4, $0x00000000
GLOBL masktab<>(SB), RODATA|NOPTR, $128

// kernKs: C(m×8) = A(m×k)·B(k×8) (+ bias), for 1 ≤ k ≤ 8 and contiguous
// rows of A (column stride 4 bytes). The k rows of B's 8-column strip stay
// in Y0..Y7 for the whole call, so each row of C costs k broadcasts and k
// FMAs; rows go four at a time (Y9..Y12), then one at a time. Every
// element is the chain kern4x16 computes (start, then one FMA per p in p
// order, then the ReLU), so the bits are the same.
//
// Registers: CX k, SI A row, R8 rsa, R9 3·rsa, DX B, R11 ldb, DI C row,
// R10 ldc, R14 3·ldc, R12 flags, R13 rows left, Y8 bias or zero, Y15 zero.
//
// func kernKs(k int, a *float32, rsa int, m int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int)

#define KS_STEP4(off, bp) \
	VBROADCASTSS off(SI), Y13; \
	VFMADD231PS bp, Y13, Y9; \
	VBROADCASTSS off(SI)(R8*1), Y14; \
	VFMADD231PS bp, Y14, Y10; \
	VBROADCASTSS off(SI)(R8*2), Y13; \
	VFMADD231PS bp, Y13, Y11; \
	VBROADCASTSS off(SI)(R9*1), Y14; \
	VFMADD231PS bp, Y14, Y12

#define KS_STEP1(off, bp) \
	VBROADCASTSS off(SI), Y13; \
	VFMADD231PS bp, Y13, Y9

TEXT ·kernKs(SB), NOSPLIT, $0-80
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R8
	MOVQ m+24(FP), R13
	MOVQ b+32(FP), DX
	MOVQ ldb+40(FP), R11
	MOVQ c+48(FP), DI
	MOVQ ldc+56(FP), R10
	MOVQ bias+64(FP), AX
	MOVQ flags+72(FP), R12
	LEAQ (R8)(R8*2), R9
	LEAQ (R10)(R10*2), R14
	VXORPS Y15, Y15, Y15
	VXORPS Y8, Y8, Y8
	TESTQ AX, AX
	JZ   ksloadb
	VMOVUPS (AX), Y8

ksloadb:
	// B's rows 0..k-1 into Y0..Y7.
	MOVQ DX, AX
	VMOVUPS (AX), Y0
	CMPQ CX, $1
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y1
	CMPQ CX, $2
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y2
	CMPQ CX, $3
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y3
	CMPQ CX, $4
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y4
	CMPQ CX, $5
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y5
	CMPQ CX, $6
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y6
	CMPQ CX, $7
	JEQ  ksrows4
	ADDQ R11, AX
	VMOVUPS (AX), Y7

ksrows4:
	CMPQ R13, $4
	JLT  ksrows1
	TESTQ $1, R12
	JNZ  ks4loadc
	VMOVAPS Y8, Y9
	VMOVAPS Y8, Y10
	VMOVAPS Y8, Y11
	VMOVAPS Y8, Y12
	JMP  ks4steps

ks4loadc:
	VMOVUPS (DI), Y9
	VMOVUPS (DI)(R10*1), Y10
	VMOVUPS (DI)(R10*2), Y11
	VMOVUPS (DI)(R14*1), Y12

ks4steps:
	KS_STEP4(0, Y0)
	CMPQ CX, $1
	JEQ  ks4done
	KS_STEP4(4, Y1)
	CMPQ CX, $2
	JEQ  ks4done
	KS_STEP4(8, Y2)
	CMPQ CX, $3
	JEQ  ks4done
	KS_STEP4(12, Y3)
	CMPQ CX, $4
	JEQ  ks4done
	KS_STEP4(16, Y4)
	CMPQ CX, $5
	JEQ  ks4done
	KS_STEP4(20, Y5)
	CMPQ CX, $6
	JEQ  ks4done
	KS_STEP4(24, Y6)
	CMPQ CX, $7
	JEQ  ks4done
	KS_STEP4(28, Y7)

ks4done:
	TESTQ $2, R12
	JZ   ks4store
	VMAXPS Y15, Y9, Y9
	VMAXPS Y15, Y10, Y10
	VMAXPS Y15, Y11, Y11
	VMAXPS Y15, Y12, Y12

ks4store:
	VMOVUPS Y9, (DI)
	VMOVUPS Y10, (DI)(R10*1)
	VMOVUPS Y11, (DI)(R10*2)
	VMOVUPS Y12, (DI)(R14*1)
	LEAQ (SI)(R8*4), SI
	LEAQ (DI)(R10*4), DI
	SUBQ $4, R13
	JMP  ksrows4

ksrows1:
	TESTQ R13, R13
	JZ   ksret
	TESTQ $1, R12
	JNZ  ks1loadc
	VMOVAPS Y8, Y9
	JMP  ks1steps

ks1loadc:
	VMOVUPS (DI), Y9

ks1steps:
	KS_STEP1(0, Y0)
	CMPQ CX, $1
	JEQ  ks1done
	KS_STEP1(4, Y1)
	CMPQ CX, $2
	JEQ  ks1done
	KS_STEP1(8, Y2)
	CMPQ CX, $3
	JEQ  ks1done
	KS_STEP1(12, Y3)
	CMPQ CX, $4
	JEQ  ks1done
	KS_STEP1(16, Y4)
	CMPQ CX, $5
	JEQ  ks1done
	KS_STEP1(20, Y5)
	CMPQ CX, $6
	JEQ  ks1done
	KS_STEP1(24, Y6)
	CMPQ CX, $7
	JEQ  ks1done
	KS_STEP1(28, Y7)

ks1done:
	TESTQ $2, R12
	JZ   ks1store
	VMAXPS Y15, Y9, Y9

ks1store:
	VMOVUPS Y9, (DI)
	ADDQ R8, SI
	ADDQ R10, DI
	DECQ R13
	JMP  ksrows1

ksret:
	VZEROUPPER
	RET

// kern8x8m computes an 8×ncols tile of C (ncols ≤ 8) for the last n % 16
// columns of eight rows: Y0..Y7 hold one row each, so per p one masked load
// of B and eight broadcasts feed eight independent FMAs, where kern4x16m
// would spend half of its FMAs on masked-out lanes. Each element's chain
// is kern4x16's (same bits). Rows of A start at a + r·rsa and step csa
// per p; rows of C at c + r·ldc (bytes). With ncols = 8 C is stored with
// plain moves (masked stores are slow on some CPUs).
//
// func kern8x8m(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, ncols int)
TEXT ·kern8x8m(SB), NOSPLIT, $0-88
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R8
	MOVQ csa+24(FP), R10
	MOVQ b+32(FP), DX
	MOVQ ldb+40(FP), R11
	MOVQ c+48(FP), AX
	MOVQ ldc+56(FP), BX
	MOVQ flags+72(FP), R12
	MOVQ ncols+80(FP), R13
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), DI
	LEAQ (BX)(BX*2), R14
	LEAQ (AX)(BX*4), R15

	// mask: lane i of Y15 set iff i < ncols.
	LEAQ masktab<>(SB), R8
	MOVQ $16, R9
	SUBQ R13, R9
	VMOVDQU (R8)(R9*4), Y15
	MOVQ rsa+16(FP), R8
	LEAQ (R8)(R8*2), R9

	TESTQ $1, R12
	JNZ  m8loadc
	MOVQ bias+64(FP), R12
	TESTQ R12, R12
	JZ   m8zero
	VMASKMOVPS (R12), Y15, Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y0, Y4
	VMOVAPS Y0, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y0, Y7
	JMP  m8start

m8zero:
	ZERO8
	JMP  m8start

m8loadc:
	VMASKMOVPS (AX), Y15, Y0
	VMASKMOVPS (AX)(BX*1), Y15, Y1
	VMASKMOVPS (AX)(BX*2), Y15, Y2
	VMASKMOVPS (AX)(R14*1), Y15, Y3
	VMASKMOVPS (R15), Y15, Y4
	VMASKMOVPS (R15)(BX*1), Y15, Y5
	VMASKMOVPS (R15)(BX*2), Y15, Y6
	VMASKMOVPS (R15)(R14*1), Y15, Y7

m8start:
	MOVQ flags+72(FP), R12
	TESTQ CX, CX
	JZ   m8done

m8loop:
	VMASKMOVPS (DX), Y15, Y8
	VBROADCASTSS (SI), Y9
	VFMADD231PS Y8, Y9, Y0
	VBROADCASTSS (SI)(R8*1), Y10
	VFMADD231PS Y8, Y10, Y1
	VBROADCASTSS (SI)(R8*2), Y11
	VFMADD231PS Y8, Y11, Y2
	VBROADCASTSS (SI)(R9*1), Y12
	VFMADD231PS Y8, Y12, Y3
	VBROADCASTSS (DI), Y9
	VFMADD231PS Y8, Y9, Y4
	VBROADCASTSS (DI)(R8*1), Y10
	VFMADD231PS Y8, Y10, Y5
	VBROADCASTSS (DI)(R8*2), Y11
	VFMADD231PS Y8, Y11, Y6
	VBROADCASTSS (DI)(R9*1), Y12
	VFMADD231PS Y8, Y12, Y7
	ADDQ R10, SI
	ADDQ R10, DI
	ADDQ R11, DX
	DECQ CX
	JNZ  m8loop

m8done:
	TESTQ $2, R12
	JZ   m8store
	RELU8

m8store:
	CMPQ R13, $8
	JEQ  m8full
	VMASKMOVPS Y0, Y15, (AX)
	VMASKMOVPS Y1, Y15, (AX)(BX*1)
	VMASKMOVPS Y2, Y15, (AX)(BX*2)
	VMASKMOVPS Y3, Y15, (AX)(R14*1)
	VMASKMOVPS Y4, Y15, (R15)
	VMASKMOVPS Y5, Y15, (R15)(BX*1)
	VMASKMOVPS Y6, Y15, (R15)(BX*2)
	VMASKMOVPS Y7, Y15, (R15)(R14*1)
	VZEROUPPER
	RET

m8full:
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, (AX)(BX*1)
	VMOVUPS Y2, (AX)(BX*2)
	VMOVUPS Y3, (AX)(R14*1)
	VMOVUPS Y4, (R15)
	VMOVUPS Y5, (R15)(BX*1)
	VMOVUPS Y6, (R15)(BX*2)
	VMOVUPS Y7, (R15)(R14*1)
	VZEROUPPER
	RET

// K1ROWS: four p of two rows (row areg in the low half, row breg in the
// high half) times B's four (Y8, in both halves) into their chains.
#define K1ROWS(areg, breg, acc) \
	VMOVUPS (areg)(BX*1), X10; \
	VINSERTF128 $1, (breg)(BX*1), Y10, Y10; \
	VFMADD231PS Y8, Y10, acc

// K1TAIL: K1ROWS for the k%4 leftover p, through the X15 lane mask.
#define K1TAIL(areg, breg, acc) \
	LEAQ (areg)(BX*1), AX; \
	VMASKMOVPS (AX), X15, X10; \
	LEAQ (breg)(BX*1), AX; \
	VMASKMOVPS (AX), X15, X11; \
	VINSERTF128 $1, X11, Y10, Y10; \
	VFMADD231PS Y8, Y10, acc

// K1SUM: (s0 + s1) + (s2 + s3) of each half into its lane 0, then ReLU
// where flags ask (Y9 is zero).
#define K1SUM(acc) \
	VPERMILPS $0xB1, acc, Y10; \
	VADDPS Y10, acc, acc; \
	VPERMILPS $0x4E, acc, Y10; \
	VADDPS Y10, acc, acc

// K1STORE: lane 0 of acc's halves to rows lo and hi of C.
#define K1STORE(acc, accx, lo, hi) \
	MOVQ lo, AX; \
	IMULQ BX, AX; \
	VMOVSS accx, (DX)(AX*1); \
	VEXTRACTF128 $1, acc, X10; \
	MOVQ hi, AX; \
	IMULQ BX, AX; \
	VMOVSS X10, (DX)(AX*1)

// kern8x1 computes an 8×1 tile of C for n = 1 with contiguous rows of A
// and B (csa = 1, ldb = 1: a value head's forward pass), bit for bit as
// kern2x8n does: four chains per element (p mod 4), chain 0 starting from
// bias, C or zero, summed as (s0 + s1) + (s2 + s3), then ReLU. kern2x8n
// spends one 8-lane FMA with one lane in use per p and row; here one
// 128-bit half holds a row's four chains (lane c for chain c: four
// consecutive p of A's row and of B are exactly that layout), two rows
// per register. Row r of A starts at a + r·rsa, row r of C at c + r·ldc
// (byte strides).
//
// func kern8x1(k int, a *float32, rsa int, b *float32, c *float32, ldc int, bias *float32, flags int)
TEXT ·kern8x1(SB), NOSPLIT, $0-64
	MOVQ flags+56(FP), AX
	TESTQ $1, AX
	JNZ  oloadc
	MOVQ bias+48(FP), AX
	TESTQ AX, AX
	JZ   ozero
	VMOVSS (AX), X0                // (bias, 0, 0, 0)
	VINSERTF128 $1, X0, Y0, Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	JMP  ostart

ozero:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	JMP  ostart

oloadc:
	// (C[r], 0, 0, 0 | C[r+4], 0, 0, 0) for r = 0…3.
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), BX
	LEAQ (DX)(BX*4), R8
	VMOVSS (DX), X0
	VMOVSS (R8), X4
	VINSERTF128 $1, X4, Y0, Y0
	ADDQ BX, DX
	ADDQ BX, R8
	VMOVSS (DX), X1
	VMOVSS (R8), X4
	VINSERTF128 $1, X4, Y1, Y1
	ADDQ BX, DX
	ADDQ BX, R8
	VMOVSS (DX), X2
	VMOVSS (R8), X4
	VINSERTF128 $1, X4, Y2, Y2
	ADDQ BX, DX
	ADDQ BX, R8
	VMOVSS (DX), X3
	VMOVSS (R8), X4
	VINSERTF128 $1, X4, Y3, Y3

ostart:
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), AX
	MOVQ b+24(FP), DX
	LEAQ (SI)(AX*1), DI
	LEAQ (SI)(AX*2), R8
	LEAQ (DI)(AX*2), R9
	LEAQ (SI)(AX*4), R12
	LEAQ (DI)(AX*4), R13
	LEAQ (R8)(AX*4), R14
	LEAQ (R9)(AX*4), R15
	XORQ BX, BX
	MOVQ k+0(FP), CX
	SHRQ $2, CX
	JZ   otail

oloop:
	VBROADCASTF128 (DX)(BX*1), Y8
	K1ROWS(SI, R12, Y0)
	K1ROWS(DI, R13, Y1)
	K1ROWS(R8, R14, Y2)
	K1ROWS(R9, R15, Y3)
	ADDQ $16, BX
	DECQ CX
	JNZ  oloop

otail:
	// The k%4 leftover p go to chains 0, 1, 2, from masked loads: the
	// other chains get +0·+0 added, which leaves them as they are, since
	// they started from +0 and a sum that starts from +0 is never −0
	// (chain 0, which may start from −0, always takes a leftover).
	MOVQ k+0(FP), CX
	ANDQ $3, CX
	JZ   osum
	LEAQ masktab<>(SB), AX
	MOVQ $16, R10
	SUBQ CX, R10
	VMOVDQU (AX)(R10*4), X15     // first k%4 lanes
	LEAQ (DX)(BX*1), AX
	VMASKMOVPS (AX), X15, X8
	VINSERTF128 $1, X8, Y8, Y8
	K1TAIL(SI, R12, Y0)
	K1TAIL(DI, R13, Y1)
	K1TAIL(R8, R14, Y2)
	K1TAIL(R9, R15, Y3)

osum:
	K1SUM(Y0)
	K1SUM(Y1)
	K1SUM(Y2)
	K1SUM(Y3)
	MOVQ flags+56(FP), AX
	TESTQ $2, AX
	JZ   ostore
	VXORPS Y9, Y9, Y9
	VMAXPS Y9, Y0, Y0
	VMAXPS Y9, Y1, Y1
	VMAXPS Y9, Y2, Y2
	VMAXPS Y9, Y3, Y3

ostore:
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), BX
	K1STORE(Y0, X0, $0, $4)
	K1STORE(Y1, X1, $1, $5)
	K1STORE(Y2, X2, $2, $6)
	K1STORE(Y3, X3, $3, $7)
	VZEROUPPER
	RET

// TCHAIN: one p of kern16xT into chain registers lo (rows i…i+7) and hi
// (i+8…i+15), then the next p.
#define TCHAIN(lo, hi) \
	VBROADCASTSS (DX), Y8; \
	VFMADD231PS (SI), Y8, lo; \
	VFMADD231PS 32(SI), Y8, hi; \
	ADDQ R9, SI; \
	ADDQ R10, DX

// kern16xT computes 16 consecutive rows of one column of C = Aᵀ·B (A
// stored k×m, rows of op(A) contiguous along A's rows: a narrow output
// layer's dW), bit for bit as kern2x8n does: four chains per element (p
// mod 4), chain 0 starting from bias, C or zero, summed as (s0 + s1) +
// (s2 + s3), then ReLU. kern2x8n gathers each row of op(A) from a column
// of A and fills one lane of 8 per FMA; here the 16 rows are 16
// consecutive values of A's row p, so each FMA fills all 8 lanes. c is 16
// contiguous values (the caller gathers and scatters strided columns),
// lda and ldb are byte strides, b points at the column's first value.
//
// func kern16xT(k int, a *float32, lda int, b *float32, ldb int, c *float32, bias *float32, flags int)
TEXT ·kern16xT(SB), NOSPLIT, $0-64
	MOVQ flags+56(FP), AX
	MOVQ c+40(FP), DI
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ $1, AX
	JNZ  xloadc
	MOVQ bias+48(FP), R8
	TESTQ R8, R8
	JZ   xzero
	VBROADCASTSS (R8), Y0
	VMOVAPS Y0, Y4
	JMP  xstart

xzero:
	VXORPS Y0, Y0, Y0
	VXORPS Y4, Y4, Y4
	JMP  xstart

xloadc:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y4

xstart:
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R9
	MOVQ b+24(FP), DX
	MOVQ ldb+32(FP), R10
	MOVQ CX, R11
	SHRQ $2, R11
	ANDQ $3, CX
	TESTQ R11, R11
	JZ   xrest

xloop:
	TCHAIN(Y0, Y4)
	TCHAIN(Y1, Y5)
	TCHAIN(Y2, Y6)
	TCHAIN(Y3, Y7)
	DECQ R11
	JNZ  xloop

xrest:
	TESTQ CX, CX
	JZ   xsum
	TCHAIN(Y0, Y4)
	DECQ CX
	JZ   xsum
	TCHAIN(Y1, Y5)
	DECQ CX
	JZ   xsum
	TCHAIN(Y2, Y6)

xsum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y6, Y4, Y4
	TESTQ $2, AX
	JZ   xstore
	VXORPS Y9, Y9, Y9
	VMAXPS Y9, Y0, Y0
	VMAXPS Y9, Y4, Y4

xstore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, 32(DI)
	VZEROUPPER
	RET
