//go:build amd64 && !purego

#include "textflag.h"

// kern6x16: C(6×16) (+)= op(A)(6×k)·B(k×16), AVX2 + FMA, for the
// convolutions' products. Twelve accumulators Y0..Y11 (row r in Y(2r),
// Y(2r+1)) against kern4x16's eight: per step p two 8-wide loads of B's
// row p and six broadcasts feed twelve FMAs, which keeps both FMA units
// busy through their latency. Each element is one FMA chain over p in
// order, from zero or from C (flags bit 0), as in kern4x16: the same bits.
// Row r of A starts at a + r·rsa bytes, and A advances csa bytes per p.

// func kern6x16(k int, a *float32, rsa, csa int, b *float32, ldb int, c *float32, ldc int, flags int)
TEXT ·kern6x16(SB), NOSPLIT, $0-72
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R13
	MOVQ csa+24(FP), R10
	MOVQ b+32(FP), DX
	MOVQ ldb+40(FP), R11
	MOVQ c+48(FP), AX
	MOVQ ldc+56(FP), R12
	MOVQ flags+64(FP), R8
	LEAQ (R13)(R13*2), R9 // 3·rsa
	LEAQ (SI)(R13*4), DI  // row 4
	LEAQ (R12)(R12*2), BX // 3·ldc

	TESTQ $1, R8
	JNZ   loadc
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
	JMP    start

loadc:
	LEAQ    (AX)(R12*4), R8
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS (AX)(R12*1), Y2
	VMOVUPS 32(AX)(R12*1), Y3
	VMOVUPS (AX)(R12*2), Y4
	VMOVUPS 32(AX)(R12*2), Y5
	VMOVUPS (AX)(BX*1), Y6
	VMOVUPS 32(AX)(BX*1), Y7
	VMOVUPS (R8), Y8
	VMOVUPS 32(R8), Y9
	VMOVUPS (R8)(R12*1), Y10
	VMOVUPS 32(R8)(R12*1), Y11

start:
	TESTQ CX, CX
	JZ    store

loop:
	VMOVUPS      (DX), Y12
	VMOVUPS      32(DX), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R13*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (SI)(R13*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (SI)(R9*1), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (DI), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (DI)(R13*1), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ         R10, SI
	ADDQ         R10, DI
	ADDQ         R11, DX
	DECQ         CX
	JNZ          loop

store:
	LEAQ    (AX)(R12*4), R8
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, (AX)(R12*1)
	VMOVUPS Y3, 32(AX)(R12*1)
	VMOVUPS Y4, (AX)(R12*2)
	VMOVUPS Y5, 32(AX)(R12*2)
	VMOVUPS Y6, (AX)(BX*1)
	VMOVUPS Y7, 32(AX)(BX*1)
	VMOVUPS Y8, (R8)
	VMOVUPS Y9, 32(R8)
	VMOVUPS Y10, (R8)(R12*1)
	VMOVUPS Y11, 32(R8)(R12*1)
	VZEROUPPER
	RET

// kern6x16g is kern6x16 with A gathered: A(r, p) is the float at
// a_r + 4·off[p] bytes, for six row pointers a_r and a table off of k
// element offsets, so a convolution's products read the taps straight
// from the image instead of from a column matrix. Same chains, same bits.

// func kern6x16g(k int, a0, a1, a2, a3, a4, a5 *float32, off *int, b *float32, ldb int, c *float32, ldc int, flags int)
TEXT ·kern6x16g(SB), NOSPLIT, $0-104
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), DI
	MOVQ a1+16(FP), R8
	MOVQ a2+24(FP), R9
	MOVQ a3+32(FP), R10
	MOVQ a4+40(FP), R12
	MOVQ a5+48(FP), R13
	MOVQ off+56(FP), SI
	MOVQ b+64(FP), DX
	MOVQ ldb+72(FP), R11
	MOVQ c+80(FP), AX
	MOVQ ldc+88(FP), BX

	TESTQ $1, flags+96(FP)
	JNZ   gloadc
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
	JMP    gstart

gloadc:
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	ADDQ    BX, AX
	VMOVUPS (AX), Y2
	VMOVUPS 32(AX), Y3
	ADDQ    BX, AX
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	ADDQ    BX, AX
	VMOVUPS (AX), Y6
	VMOVUPS 32(AX), Y7
	ADDQ    BX, AX
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	ADDQ    BX, AX
	VMOVUPS (AX), Y10
	VMOVUPS 32(AX), Y11

gstart:
	TESTQ CX, CX
	JZ    gstore

gloop:
	MOVQ         (SI), BX
	VMOVUPS      (DX), Y12
	VMOVUPS      32(DX), Y13
	VBROADCASTSS (DI)(BX*4), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (R8)(BX*4), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (R9)(BX*4), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R10)(BX*4), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (R12)(BX*4), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (R13)(BX*4), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ         $8, SI
	ADDQ         R11, DX
	DECQ         CX
	JNZ          gloop

gstore:
	MOVQ    c+80(FP), AX
	MOVQ    ldc+88(FP), BX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ    BX, AX
	VMOVUPS Y2, (AX)
	VMOVUPS Y3, 32(AX)
	ADDQ    BX, AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	ADDQ    BX, AX
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	ADDQ    BX, AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	ADDQ    BX, AX
	VMOVUPS Y10, (AX)
	VMOVUPS Y11, 32(AX)
	VZEROUPPER
	RET

// func addRuns4(dst, src *float32, c, k, w, hw int)
// For each of c channels and k rows: dst[ch·hw + t·w …+3] += src[…4 at a
// time, end to end]: a convolution's col2im of one output position whose
// kernel rows are 4 taps long (one 4-wide add per run, dst + src as the
// scalar dst += src).
TEXT ·addRuns4(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ c+16(FP), CX
	MOVQ k+24(FP), DX
	MOVQ w+32(FP), R8
	MOVQ hw+40(FP), R9
	SHLQ $2, R8
	SHLQ $2, R9

chan:
	MOVQ DI, AX
	MOVQ DX, BX

run:
	MOVUPS (AX), X1
	MOVUPS (SI), X0
	ADDPS  X0, X1
	MOVUPS X1, (AX)
	ADDQ   $16, SI
	ADDQ   R8, AX
	DECQ   BX
	JNZ    run
	ADDQ   R9, DI
	DECQ   CX
	JNZ    chan
	RET
