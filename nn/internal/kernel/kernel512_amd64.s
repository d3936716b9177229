//go:build amd64 && !purego

#include "textflag.h"

// AVX-512F micro-kernels. Every element of C is computed exactly as in the
// AVX2 kernels (start from bias, C or zero, then one FMA per p in p order,
// then ReLU), only with 16 lanes per register, so both paths give the same
// bits. Column tails use opmask registers: masked-out lanes of B, C and
// bias are neither read nor written.

// kern4x32z computes a 4×ncols tile (1 ≤ ncols ≤ 32) of C: Z0..Z7 hold
// row r in Z(2r), Z(2r+1); K1 masks columns 0..15, K2 columns 16..31.
// Arguments as kern4x16m's.
//
// func kern4x32z(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)
TEXT ·kern4x32z(SB), NOSPLIT, $0-120
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ csa+40(FP), R10
	MOVQ b+48(FP), DX
	MOVQ ldb+56(FP), R11
	MOVQ bias+96(FP), AX
	MOVQ flags+104(FP), R12
	MOVQ ncols+112(FP), CX

	// K1 = low 16 bits, K2 = next 16 bits of (1 << ncols) − 1.
	MOVQ $1, R14
	SHLQ CX, R14
	DECQ R14
	KMOVW R14, K1
	SHRQ $16, R14
	KMOVW R14, K2
	MOVQ k+0(FP), CX

	TESTQ $1, R12
	JNZ  zloadc
	TESTQ AX, AX
	JZ   zzero
	VMOVUPS.Z (AX), K1, Z0
	VMOVUPS.Z 64(AX), K2, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z1, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z1, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z1, Z7
	JMP  zstart

zzero:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	JMP  zstart

zloadc:
	MOVQ c0+64(FP), AX
	VMOVUPS.Z (AX), K1, Z0
	VMOVUPS.Z 64(AX), K2, Z1
	MOVQ c1+72(FP), AX
	VMOVUPS.Z (AX), K1, Z2
	VMOVUPS.Z 64(AX), K2, Z3
	MOVQ c2+80(FP), AX
	VMOVUPS.Z (AX), K1, Z4
	VMOVUPS.Z 64(AX), K2, Z5
	MOVQ c3+88(FP), AX
	VMOVUPS.Z (AX), K1, Z6
	VMOVUPS.Z 64(AX), K2, Z7

zstart:
	XORQ BX, BX
	TESTQ CX, CX
	JZ   zdone

zloop:
	VMOVUPS.Z (DX), K1, Z8
	VMOVUPS.Z 64(DX), K2, Z9
	VBROADCASTSS (SI)(BX*1), Z10
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z10, Z1
	VBROADCASTSS (DI)(BX*1), Z11
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z9, Z11, Z3
	VBROADCASTSS (R8)(BX*1), Z12
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z9, Z12, Z5
	VBROADCASTSS (R9)(BX*1), Z13
	VFMADD231PS Z8, Z13, Z6
	VFMADD231PS Z9, Z13, Z7
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	JNZ  zloop

zdone:
	TESTQ $2, R12
	JZ   zstore
	VPXORD Z8, Z8, Z8
	VMAXPS Z8, Z0, Z0
	VMAXPS Z8, Z1, Z1
	VMAXPS Z8, Z2, Z2
	VMAXPS Z8, Z3, Z3
	VMAXPS Z8, Z4, Z4
	VMAXPS Z8, Z5, Z5
	VMAXPS Z8, Z6, Z6
	VMAXPS Z8, Z7, Z7

zstore:
	MOVQ c0+64(FP), AX
	VMOVUPS Z0, K1, (AX)
	VMOVUPS Z1, K2, 64(AX)
	MOVQ c1+72(FP), AX
	VMOVUPS Z2, K1, (AX)
	VMOVUPS Z3, K2, 64(AX)
	MOVQ c2+80(FP), AX
	VMOVUPS Z4, K1, (AX)
	VMOVUPS Z5, K2, 64(AX)
	MOVQ c3+88(FP), AX
	VMOVUPS Z6, K1, (AX)
	VMOVUPS Z7, K2, 64(AX)
	VZEROUPPER
	RET

// Z8ROW: one row of kern8x32z's step: broadcast A's value, two FMAs.
#define Z8ROW(areg, bc, lo, hi) \
	VBROADCASTSS (areg)(BX*1), bc; \
	VFMADD231PS Z16, bc, lo; \
	VFMADD231PS Z17, bc, hi

// Z8LOAD, Z8STORE: one row of C at AX (masked by K1, K2), then AX += BX.
#define Z8LOAD(lo, hi) \
	VMOVUPS.Z (AX), K1, lo; \
	VMOVUPS.Z 64(AX), K2, hi; \
	ADDQ BX, AX

#define Z8STORE(lo, hi) \
	VMOVUPS lo, K1, (AX); \
	VMOVUPS hi, K2, 64(AX); \
	ADDQ BX, AX

// kern8x32z is kern4x32z for 8 rows: 16 accumulators, so two FMA ports
// with a 4-cycle latency always have independent work, and each B vector
// loaded serves 8 rows. Row r of A starts at a + r·rsa, row r of C at
// c + r·ldc (byte strides). Same per-element operations as kern4x32z.
//
// func kern8x32z(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, ncols int)
TEXT ·kern8x32z(SB), NOSPLIT, $0-88
	MOVQ ncols+80(FP), CX
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVW AX, K1
	SHRQ $16, AX
	KMOVW AX, K2

	MOVQ flags+72(FP), AX
	TESTQ $1, AX
	JNZ  z8loadc
	MOVQ bias+64(FP), AX
	TESTQ AX, AX
	JZ   z8zero
	VMOVUPS.Z (AX), K1, Z0
	VMOVUPS.Z 64(AX), K2, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z1, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z1, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z1, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z1, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z1, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z1, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z1, Z15
	JMP  z8start

z8zero:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	JMP  z8start

z8loadc:
	MOVQ c+48(FP), AX
	MOVQ ldc+56(FP), BX
	Z8LOAD(Z0, Z1)
	Z8LOAD(Z2, Z3)
	Z8LOAD(Z4, Z5)
	Z8LOAD(Z6, Z7)
	Z8LOAD(Z8, Z9)
	Z8LOAD(Z10, Z11)
	Z8LOAD(Z12, Z13)
	Z8LOAD(Z14, Z15)

z8start:
	MOVQ k+0(FP), CX
	TESTQ CX, CX
	JZ   z8done
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), AX
	MOVQ csa+24(FP), R10
	MOVQ b+32(FP), DX
	MOVQ ldb+40(FP), R11
	LEAQ (SI)(AX*1), DI
	LEAQ (SI)(AX*2), R8
	LEAQ (DI)(AX*2), R9
	LEAQ (SI)(AX*4), R12
	LEAQ (DI)(AX*4), R13
	LEAQ (R8)(AX*4), R14
	LEAQ (R9)(AX*4), R15
	XORQ BX, BX

z8loop:
	VMOVUPS.Z (DX), K1, Z16
	VMOVUPS.Z 64(DX), K2, Z17
	Z8ROW(SI, Z18, Z0, Z1)
	Z8ROW(DI, Z19, Z2, Z3)
	Z8ROW(R8, Z20, Z4, Z5)
	Z8ROW(R9, Z21, Z6, Z7)
	Z8ROW(R12, Z22, Z8, Z9)
	Z8ROW(R13, Z23, Z10, Z11)
	Z8ROW(R14, Z24, Z12, Z13)
	Z8ROW(R15, Z25, Z14, Z15)
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	JNZ  z8loop

z8done:
	MOVQ flags+72(FP), AX
	TESTQ $2, AX
	JZ   z8store
	VPXORD Z16, Z16, Z16
	VMAXPS Z16, Z0, Z0
	VMAXPS Z16, Z1, Z1
	VMAXPS Z16, Z2, Z2
	VMAXPS Z16, Z3, Z3
	VMAXPS Z16, Z4, Z4
	VMAXPS Z16, Z5, Z5
	VMAXPS Z16, Z6, Z6
	VMAXPS Z16, Z7, Z7
	VMAXPS Z16, Z8, Z8
	VMAXPS Z16, Z9, Z9
	VMAXPS Z16, Z10, Z10
	VMAXPS Z16, Z11, Z11
	VMAXPS Z16, Z12, Z12
	VMAXPS Z16, Z13, Z13
	VMAXPS Z16, Z14, Z14
	VMAXPS Z16, Z15, Z15

z8store:
	MOVQ c+48(FP), AX
	MOVQ ldc+56(FP), BX
	Z8STORE(Z0, Z1)
	Z8STORE(Z2, Z3)
	Z8STORE(Z4, Z5)
	Z8STORE(Z6, Z7)
	Z8STORE(Z8, Z9)
	Z8STORE(Z10, Z11)
	Z8STORE(Z12, Z13)
	Z8STORE(Z14, Z15)
	VZEROUPPER
	RET

// kern4x16z computes a 4×ncols tile (1 ≤ ncols ≤ 32) of C: Z0..Z7 hold
// Arguments as kern4x16m's.
//
// func kern4x16z(k int, a0, a1, a2, a3 *float32, csa int, b *float32, ldb int, c0, c1, c2, c3 *float32, bias *float32, flags int, ncols int)
TEXT ·kern4x16z(SB), NOSPLIT, $0-120
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ csa+40(FP), R10
	MOVQ b+48(FP), DX
	MOVQ ldb+56(FP), R11
	MOVQ bias+96(FP), AX
	MOVQ flags+104(FP), R12
	MOVQ ncols+112(FP), CX

	MOVQ $1, R14
	SHLQ CX, R14
	DECQ R14
	KMOVW R14, K1
	MOVQ k+0(FP), CX

	TESTQ $1, R12
	JNZ  hloadc
	TESTQ AX, AX
	JZ   hzero
	VMOVUPS.Z (AX), K1, Z0
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z6
	JMP  hstart

hzero:
	VPXORD Z0, Z0, Z0
	VPXORD Z2, Z2, Z2
	VPXORD Z4, Z4, Z4
	VPXORD Z6, Z6, Z6
	JMP  hstart

hloadc:
	MOVQ c0+64(FP), AX
	VMOVUPS.Z (AX), K1, Z0
	MOVQ c1+72(FP), AX
	VMOVUPS.Z (AX), K1, Z2
	MOVQ c2+80(FP), AX
	VMOVUPS.Z (AX), K1, Z4
	MOVQ c3+88(FP), AX
	VMOVUPS.Z (AX), K1, Z6

hstart:
	XORQ BX, BX
	TESTQ CX, CX
	JZ   hdone

hloop:
	VMOVUPS.Z (DX), K1, Z8
	VBROADCASTSS (SI)(BX*1), Z10
	VFMADD231PS Z8, Z10, Z0
	VBROADCASTSS (DI)(BX*1), Z11
	VFMADD231PS Z8, Z11, Z2
	VBROADCASTSS (R8)(BX*1), Z12
	VFMADD231PS Z8, Z12, Z4
	VBROADCASTSS (R9)(BX*1), Z13
	VFMADD231PS Z8, Z13, Z6
	ADDQ R10, BX
	ADDQ R11, DX
	DECQ CX
	JNZ  hloop

hdone:
	TESTQ $2, R12
	JZ   hstore
	VPXORD Z8, Z8, Z8
	VMAXPS Z8, Z0, Z0
	VMAXPS Z8, Z2, Z2
	VMAXPS Z8, Z4, Z4
	VMAXPS Z8, Z6, Z6

hstore:
	MOVQ c0+64(FP), AX
	VMOVUPS Z0, K1, (AX)
	MOVQ c1+72(FP), AX
	VMOVUPS Z2, K1, (AX)
	MOVQ c2+80(FP), AX
	VMOVUPS Z4, K1, (AX)
	MOVQ c3+88(FP), AX
	VMOVUPS Z6, K1, (AX)
	VZEROUPPER
	RET

// kern1x64z computes one row of C over ncols ≤ 64 columns (the batch-1
// path): four accumulators Z0..Z3 under masks K1..K4, one broadcast of
// A(0, p) per p.
//
// func kern1x64z(k int, a *float32, csa int, b *float32, ldb int, c *float32, bias *float32, flags int, ncols int)
TEXT ·kern1x64z(SB), NOSPLIT, $0-72
	MOVQ a+8(FP), SI
	MOVQ csa+16(FP), R10
	MOVQ b+24(FP), DX
	MOVQ ldb+32(FP), R11
	MOVQ c+40(FP), DI
	MOVQ bias+48(FP), AX
	MOVQ flags+56(FP), R12
	MOVQ ncols+64(FP), CX

	// K1..K4 = 16-bit pieces of the ncols-lane mask (ncols = 64 sets all).
	MOVQ $-1, R14
	CMPQ CX, $64
	JAE  k1mask
	MOVQ $1, R14
	SHLQ CX, R14
	DECQ R14

k1mask:
	KMOVW R14, K1
	SHRQ $16, R14
	KMOVW R14, K2
	SHRQ $16, R14
	KMOVW R14, K3
	SHRQ $16, R14
	KMOVW R14, K4
	MOVQ k+0(FP), CX

	TESTQ $1, R12
	JNZ  k1zloadc
	TESTQ AX, AX
	JZ   k1zzero
	VMOVUPS.Z 0(AX), K1, Z0
	VMOVUPS.Z 64(AX), K2, Z1
	VMOVUPS.Z 128(AX), K3, Z2
	VMOVUPS.Z 192(AX), K4, Z3
	JMP  k1zstart

k1zzero:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	JMP  k1zstart

k1zloadc:
	VMOVUPS.Z 0(DI), K1, Z0
	VMOVUPS.Z 64(DI), K2, Z1
	VMOVUPS.Z 128(DI), K3, Z2
	VMOVUPS.Z 192(DI), K4, Z3

k1zstart:
	TESTQ CX, CX
	JZ   k1zdone

k1zloop:
	VBROADCASTSS (SI), Z15
	VMOVUPS.Z 0(DX), K1, Z4
	VMOVUPS.Z 64(DX), K2, Z5
	VMOVUPS.Z 128(DX), K3, Z6
	VMOVUPS.Z 192(DX), K4, Z7
	VFMADD231PS Z4, Z15, Z0
	VFMADD231PS Z5, Z15, Z1
	VFMADD231PS Z6, Z15, Z2
	VFMADD231PS Z7, Z15, Z3
	ADDQ R10, SI
	ADDQ R11, DX
	DECQ CX
	JNZ  k1zloop

k1zdone:
	TESTQ $2, R12
	JZ   k1zstore
	VPXORD Z8, Z8, Z8
	VMAXPS Z8, Z0, Z0
	VMAXPS Z8, Z1, Z1
	VMAXPS Z8, Z2, Z2
	VMAXPS Z8, Z3, Z3

k1zstore:
	VMOVUPS Z0, K1, 0(DI)
	VMOVUPS Z1, K2, 64(DI)
	VMOVUPS Z2, K3, 128(DI)
	VMOVUPS Z3, K4, 192(DI)
	VZEROUPPER
	RET

// adamZ is adamAVX with 16 lanes: the same operations in the same order
// per element, so the same bits. n is a multiple of 16.
//
// func adamZ(w, grad, m, v *float32, n int, c *[7]float32)
TEXT ·adamZ(SB), NOSPLIT, $8-48
	// Subnormal moments (a gradient that stays near zero drives m and v
	// below 2⁻¹²⁶) take a slow microcoded path: the loop runs with
	// flush-to-zero and denormals-are-zero set, restored at the end.
	// Assembly is never preempted asynchronously, so no other goroutine
	// runs under this MXCSR.
	STMXCSR 0(SP)
	MOVL 0(SP), R10
	MOVL R10, 4(SP)
	ORL  $0x8040, R10
	MOVL R10, 0(SP)
	LDMXCSR 0(SP)
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	SHRQ $4, CX
	JZ   azdone
	VBROADCASTSS 0(AX), Z8
	VBROADCASTSS 4(AX), Z9
	VBROADCASTSS 8(AX), Z10
	VBROADCASTSS 12(AX), Z11
	VBROADCASTSS 16(AX), Z12
	VBROADCASTSS 20(AX), Z13
	VBROADCASTSS 24(AX), Z14

azloop:
	VMOVUPS (SI), Z0
	VMULPS (R8), Z8, Z1
	VFMADD231PS Z0, Z9, Z1
	VMOVUPS Z1, (R8)
	VMULPS Z0, Z0, Z2
	VMULPS (R9), Z10, Z3
	VFMADD231PS Z2, Z11, Z3
	VMOVUPS Z3, (R9)
	VSQRTPS Z3, Z4
	VFMADD213PS Z12, Z14, Z4
	VMULPS Z1, Z13, Z5
	VDIVPS Z4, Z5, Z5
	VMOVUPS (DI), Z6
	VSUBPS Z5, Z6, Z6
	VMOVUPS Z6, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, R9
	DECQ CX
	JNZ  azloop

azdone:
	LDMXCSR 4(SP)
	VZEROUPPER
	RET

// fmaLoopZ runs n iterations of 12 independent 16-lane FMAs (enough
// chains to cover the FMA latency on every AVX-512 CPU): the per-core
// AVX-512 peak is 12·16·2·n FLOPs over its run time.
//
// func fmaLoopZ(n int)
TEXT ·fmaLoopZ(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13

fzloop:
	VFMADD231PS Z12, Z13, Z0
	VFMADD231PS Z12, Z13, Z1
	VFMADD231PS Z12, Z13, Z2
	VFMADD231PS Z12, Z13, Z3
	VFMADD231PS Z12, Z13, Z4
	VFMADD231PS Z12, Z13, Z5
	VFMADD231PS Z12, Z13, Z6
	VFMADD231PS Z12, Z13, Z7
	VFMADD231PS Z12, Z13, Z8
	VFMADD231PS Z12, Z13, Z9
	VFMADD231PS Z12, Z13, Z10
	VFMADD231PS Z12, Z13, Z11
	DECQ CX
	JNZ  fzloop
	VZEROUPPER
	RET

// fmaLoopY is fmaLoopZ with 8-lane AVX2 FMAs.
//
// func fmaLoopY(n int)
TEXT ·fmaLoopY(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13

fyloop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ CX
	JNZ  fyloop
	VZEROUPPER
	RET
