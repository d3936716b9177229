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
// AMD EPYC (docs/BENCHMARKS.md); the 32-byte frame holds the 8 row
// offsets on their way to general registers.
TEXT ·tanhAVX2(SB), NOSPLIT, $32-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ c+16(FP), BX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   tdone
	VBROADCASTSS tabs<>(SB), Y8    // ^(1<<31)
	VBROADCASTSS tmax<>(SB), Y9    // tanhMax
	VBROADCASTSS tper<>(SB), Y10   // tanhPerUnit
	VPBROADCASTD tlast<>(SB), Y11  // tanhPieces-1

tloop:
	VMOVUPS (SI), Y0               // v
	VANDPS  Y8, Y0, Y1             // a := |v|
	// min(a, tanhMax) returns its second source, tanhMax, when a is NaN:
	// the `if !(a < tanhMax)` of the Go code.
	VMINPS  Y9, Y1, Y1
	VMULPS  Y10, Y1, Y1            // u := a * tanhPerUnit
	VCVTTPS2DQ Y1, Y2              // int(u), truncated
	VPMINSD Y11, Y2, Y2            // k := min(int(u), tanhPieces-1)
	VCVTDQ2PS Y2, Y3               // float32(k)
	VSUBPS  Y3, Y1, Y1             // s := u - float32(k)
	VPSLLD  $4, Y2, Y2             // 16k: the byte offset of piece k's row
	VMOVDQU Y2, 0(SP)
	MOVL 0(SP), AX
	MOVL 4(SP), DX
	MOVL 8(SP), R8
	MOVL 12(SP), R9
	MOVL 16(SP), R10
	MOVL 20(SP), R11
	MOVL 24(SP), R12
	MOVL 28(SP), R13
	VMOVUPS (BX)(AX*1), X4
	VINSERTF128 $1, (BX)(R10*1), Y4, Y4  // rows k0 | k4
	VMOVUPS (BX)(DX*1), X5
	VINSERTF128 $1, (BX)(R11*1), Y5, Y5  // rows k1 | k5
	VMOVUPS (BX)(R8*1), X6
	VINSERTF128 $1, (BX)(R12*1), Y6, Y6  // rows k2 | k6
	VMOVUPS (BX)(R9*1), X7
	VINSERTF128 $1, (BX)(R13*1), Y7, Y7  // rows k3 | k7
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
	VANDNPS Y0, Y8, Y5             // bits & (1<<31)
	VORPS   Y5, Y4, Y4             // t | sign
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  tloop

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
