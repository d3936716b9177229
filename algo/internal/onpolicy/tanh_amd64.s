//go:build amd64 && !purego

#include "textflag.h"

// func tanhAVX2(dst, x, c *float32, n int)
// tanhToGo for n a multiple of 8, 8 lanes per step. Each line is the Go
// operation it reproduces; multiplies and adds stay separate instructions
// (no FMA), as the Go compiler emits them at GOAMD64=v1, so every lane
// rounds exactly where the scalar loop does.
//
// The 4 coefficients of each lane's piece are one 16-byte row of c: the
// 8 rows are loaded whole and transposed (4x4 in each 128-bit half) into
// p[0]…p[3] vectors. Four VGATHERDPS did the same ~3x slower on this
// AMD EPYC (docs/BENCHMARKS.md).
//
// Two passes over chunks of up to 64 elements: the first writes each
// lane's row offset and local coordinate s into the 512-byte frame, the
// second loads the offsets into general registers and runs the rest. In
// one pass every step's table loads waited on its own vector arithmetic
// (index, store, reload), a chain of ~50 cycles that the out-of-order
// window overlapped only about twice; the second pass's loads depend on
// nothing computed in it. Each block of x is read before its block of dst
// is written, so dst may be x.
TEXT ·tanhAVX2(SB), NOSPLIT, $512-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ c+16(FP), BX
	MOVQ n+24(FP), CX
	SHRQ $3, CX                    // steps of 8 left
	JZ   tdone
	VBROADCASTSS tabs<>(SB), Y8    // ^(1<<31)
	VBROADCASTSS tmax<>(SB), Y9    // tanhMax
	VBROADCASTSS tper<>(SB), Y10   // tanhPerUnit
	VPBROADCASTD tlast<>(SB), Y11  // tanhPieces-1

tchunk:
	MOVQ CX, DX                    // steps in this chunk: min(CX, 8)
	CMPQ DX, $8
	JLE  tsized
	MOVQ $8, DX

tsized:
	SUBQ DX, CX
	MOVQ SI, R8
	LEAQ 0(SP), R9
	MOVQ DX, R10

tpass1:
	VANDPS  (R8), Y8, Y1           // a := |v|
	// min(a, tanhMax) returns its second source, tanhMax, when a is NaN:
	// the `if !(a < tanhMax)` of the Go code.
	VMINPS  Y9, Y1, Y1
	VMULPS  Y10, Y1, Y1            // u := a * tanhPerUnit
	VCVTTPS2DQ Y1, Y2              // int(u), truncated
	VPMINSD Y11, Y2, Y2            // k := min(int(u), tanhPieces-1)
	VCVTDQ2PS Y2, Y3               // float32(k)
	VSUBPS  Y3, Y1, Y1             // s := u - float32(k)
	VMOVUPS Y1, 256(R9)
	VPSLLD  $4, Y2, Y2             // 16k: the byte offset of piece k's row
	VMOVDQU Y2, (R9)
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ R10
	JNZ  tpass1

	LEAQ 0(SP), R9

tpass2:
	MOVL 0(R9), AX
	MOVL 16(R9), R10
	VMOVUPS (BX)(AX*1), X4
	VINSERTF128 $1, (BX)(R10*1), Y4, Y4  // rows k0 | k4
	MOVL 4(R9), R11
	MOVL 20(R9), R12
	VMOVUPS (BX)(R11*1), X5
	VINSERTF128 $1, (BX)(R12*1), Y5, Y5  // rows k1 | k5
	MOVL 8(R9), R13
	MOVL 24(R9), AX
	VMOVUPS (BX)(R13*1), X6
	VINSERTF128 $1, (BX)(AX*1), Y6, Y6   // rows k2 | k6
	MOVL 12(R9), R10
	MOVL 28(R9), R11
	VMOVUPS (BX)(R10*1), X7
	VINSERTF128 $1, (BX)(R11*1), Y7, Y7  // rows k3 | k7
	VMOVUPS 256(R9), Y1            // s
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VUNPCKLPD Y14, Y12, Y7         // p[0]
	VUNPCKHPD Y14, Y12, Y6         // p[1]
	VUNPCKLPD Y15, Y13, Y5         // p[2]
	VUNPCKHPD Y15, Y13, Y4         // p[3]
	VMULPS  Y4, Y1, Y4             // s*p[3]
	VADDPS  Y4, Y5, Y4             // p[2]+s*p[3]
	VMULPS  Y4, Y1, Y4             // s*(…)
	VADDPS  Y4, Y6, Y4             // p[1]+s*(…)
	VMULPS  Y4, Y1, Y4             // s*(…)
	VADDPS  Y4, Y7, Y4             // t := p[0]+s*(…)
	VANDNPS (SI), Y8, Y5           // bits & (1<<31)
	VORPS   Y5, Y4, Y4             // t | sign
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R9
	DECQ DX
	JNZ  tpass2

	TESTQ CX, CX
	JNZ  tchunk

tdone:
	VZEROUPPER
	RET

// func tanhBackAVX2(dx, dy, y *float32, n int)
// dx[i] = dy[i] * (1 - y[i]*y[i]) for n a multiple of 8, unfused like the
// Go loop.
TEXT ·tanhBackAVX2(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   bdone
	VBROADCASTSS tone<>(SB), Y8

bloop:
	VMOVUPS (DX), Y0
	VMULPS  Y0, Y0, Y0             // v*v
	VSUBPS  Y0, Y8, Y0             // 1 - v*v
	VMULPS  (SI), Y0, Y0           // dy[i] * (…)
	VMOVUPS Y0, (DI)
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  bloop

bdone:
	VZEROUPPER
	RET

DATA tabs<>+0(SB)/4, $0x7fffffff
GLOBL tabs<>(SB), RODATA|NOPTR, $4
DATA tmax<>+0(SB)/4, $0x41200000
GLOBL tmax<>(SB), RODATA|NOPTR, $4
DATA tper<>+0(SB)/4, $0x42000000
GLOBL tper<>(SB), RODATA|NOPTR, $4
DATA tlast<>+0(SB)/4, $319
GLOBL tlast<>(SB), RODATA|NOPTR, $4
DATA tone<>+0(SB)/4, $0x3f800000
GLOBL tone<>(SB), RODATA|NOPTR, $4
