//go:build amd64 && !purego

#include "textflag.h"

// func reluBackAVX(dx, dy, y *float32, n int)
// dx[i] = dy[i] if y[i] > 0 else 0, for n a multiple of 8: a compare and
// an AND instead of a data-dependent branch.
TEXT ·reluBackAVX(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   rdone
	VXORPS Y0, Y0, Y0

rloop:
	VMOVUPS (DX), Y1
	VCMPPS $0x0e, Y0, Y1, Y2
	VANDPS (SI), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  rloop

rdone:
	VZEROUPPER
	RET

// func tanhAVX(dst, src *float32, n int)
// dst[i] = tanh(src[i]) for n a multiple of 8, as x·P(x²)/Q(x²): the
// [11/12] Padé approximant from Lambert's continued fraction for tanh,
// x clamped to ±9 (where float32 tanh is 1 to within 1 ulp). Maximum
// relative error about 6e-7 in float32 (checked in kernel_test.go).
TEXT ·tanhAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   tdone
	VMOVUPS tclamp<>(SB), Y8
	VMOVUPS tnclamp<>(SB), Y9

tloop:
	VMOVUPS (SI), Y0
	VMINPS Y8, Y0, Y0
	VMAXPS Y9, Y0, Y0
	VMULPS Y0, Y0, Y1
	VMOVUPS tp5<>(SB), Y2
	VFMADD213PS tp4<>(SB), Y1, Y2
	VFMADD213PS tp3<>(SB), Y1, Y2
	VFMADD213PS tp2<>(SB), Y1, Y2
	VFMADD213PS tp1<>(SB), Y1, Y2
	VFMADD213PS tp0<>(SB), Y1, Y2
	VMOVUPS tq6<>(SB), Y3
	VFMADD213PS tq5<>(SB), Y1, Y3
	VFMADD213PS tq4<>(SB), Y1, Y3
	VFMADD213PS tq3<>(SB), Y1, Y3
	VFMADD213PS tq2<>(SB), Y1, Y3
	VFMADD213PS tq1<>(SB), Y1, Y3
	VFMADD213PS tq0<>(SB), Y1, Y3
	VMULPS Y0, Y2, Y2
	VDIVPS Y3, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  tloop

tdone:
	VZEROUPPER
	RET

// func tanhBackAVX(dx, dy, y *float32, n int)
// dx[i] = dy[i]·(1 − y[i]²) for n a multiple of 8.
TEXT ·tanhBackAVX(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   tbdone
	VMOVUPS tone<>(SB), Y8

tbloop:
	VMOVUPS (DX), Y1
	VMOVAPS Y8, Y2
	VFNMADD231PS Y1, Y1, Y2
	VMULPS (SI), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  tbloop

tbdone:
	VZEROUPPER
	RET

DATA tclamp<>+0(SB)/4, $0x41100000
DATA tclamp<>+4(SB)/4, $0x41100000
DATA tclamp<>+8(SB)/4, $0x41100000
DATA tclamp<>+12(SB)/4, $0x41100000
DATA tclamp<>+16(SB)/4, $0x41100000
DATA tclamp<>+20(SB)/4, $0x41100000
DATA tclamp<>+24(SB)/4, $0x41100000
DATA tclamp<>+28(SB)/4, $0x41100000
GLOBL tclamp<>(SB), RODATA|NOPTR, $32
DATA tnclamp<>+0(SB)/4, $0xc1100000
DATA tnclamp<>+4(SB)/4, $0xc1100000
DATA tnclamp<>+8(SB)/4, $0xc1100000
DATA tnclamp<>+12(SB)/4, $0xc1100000
DATA tnclamp<>+16(SB)/4, $0xc1100000
DATA tnclamp<>+20(SB)/4, $0xc1100000
DATA tnclamp<>+24(SB)/4, $0xc1100000
DATA tnclamp<>+28(SB)/4, $0xc1100000
GLOBL tnclamp<>(SB), RODATA|NOPTR, $32
DATA tone<>+0(SB)/4, $0x3f800000
DATA tone<>+4(SB)/4, $0x3f800000
DATA tone<>+8(SB)/4, $0x3f800000
DATA tone<>+12(SB)/4, $0x3f800000
DATA tone<>+16(SB)/4, $0x3f800000
DATA tone<>+20(SB)/4, $0x3f800000
DATA tone<>+24(SB)/4, $0x3f800000
DATA tone<>+28(SB)/4, $0x3f800000
GLOBL tone<>(SB), RODATA|NOPTR, $32
DATA tp0<>+0(SB)/4, $0x3f800000
DATA tp0<>+4(SB)/4, $0x3f800000
DATA tp0<>+8(SB)/4, $0x3f800000
DATA tp0<>+12(SB)/4, $0x3f800000
DATA tp0<>+16(SB)/4, $0x3f800000
DATA tp0<>+20(SB)/4, $0x3f800000
DATA tp0<>+24(SB)/4, $0x3f800000
DATA tp0<>+28(SB)/4, $0x3f800000
GLOBL tp0<>(SB), RODATA|NOPTR, $32
DATA tp1<>+0(SB)/4, $0x3e1467e2
DATA tp1<>+4(SB)/4, $0x3e1467e2
DATA tp1<>+8(SB)/4, $0x3e1467e2
DATA tp1<>+12(SB)/4, $0x3e1467e2
DATA tp1<>+16(SB)/4, $0x3e1467e2
DATA tp1<>+20(SB)/4, $0x3e1467e2
DATA tp1<>+24(SB)/4, $0x3e1467e2
DATA tp1<>+28(SB)/4, $0x3e1467e2
GLOBL tp1<>(SB), RODATA|NOPTR, $32
DATA tp2<>+0(SB)/4, $0x3ba2d286
DATA tp2<>+4(SB)/4, $0x3ba2d286
DATA tp2<>+8(SB)/4, $0x3ba2d286
DATA tp2<>+12(SB)/4, $0x3ba2d286
DATA tp2<>+16(SB)/4, $0x3ba2d286
DATA tp2<>+20(SB)/4, $0x3ba2d286
DATA tp2<>+24(SB)/4, $0x3ba2d286
DATA tp2<>+28(SB)/4, $0x3ba2d286
GLOBL tp2<>(SB), RODATA|NOPTR, $32
DATA tp3<>+0(SB)/4, $0x3873c1e8
DATA tp3<>+4(SB)/4, $0x3873c1e8
DATA tp3<>+8(SB)/4, $0x3873c1e8
DATA tp3<>+12(SB)/4, $0x3873c1e8
DATA tp3<>+16(SB)/4, $0x3873c1e8
DATA tp3<>+20(SB)/4, $0x3873c1e8
DATA tp3<>+24(SB)/4, $0x3873c1e8
DATA tp3<>+28(SB)/4, $0x3873c1e8
GLOBL tp3<>(SB), RODATA|NOPTR, $32
DATA tp4<>+0(SB)/4, $0x347ee8e6
DATA tp4<>+4(SB)/4, $0x347ee8e6
DATA tp4<>+8(SB)/4, $0x347ee8e6
DATA tp4<>+12(SB)/4, $0x347ee8e6
DATA tp4<>+16(SB)/4, $0x347ee8e6
DATA tp4<>+20(SB)/4, $0x347ee8e6
DATA tp4<>+24(SB)/4, $0x347ee8e6
DATA tp4<>+28(SB)/4, $0x347ee8e6
GLOBL tp4<>(SB), RODATA|NOPTR, $32
DATA tp5<>+0(SB)/4, $0x2f879947
DATA tp5<>+4(SB)/4, $0x2f879947
DATA tp5<>+8(SB)/4, $0x2f879947
DATA tp5<>+12(SB)/4, $0x2f879947
DATA tp5<>+16(SB)/4, $0x2f879947
DATA tp5<>+20(SB)/4, $0x2f879947
DATA tp5<>+24(SB)/4, $0x2f879947
DATA tp5<>+28(SB)/4, $0x2f879947
GLOBL tp5<>(SB), RODATA|NOPTR, $32
DATA tq0<>+0(SB)/4, $0x3f800000
DATA tq0<>+4(SB)/4, $0x3f800000
DATA tq0<>+8(SB)/4, $0x3f800000
DATA tq0<>+12(SB)/4, $0x3f800000
DATA tq0<>+16(SB)/4, $0x3f800000
DATA tq0<>+20(SB)/4, $0x3f800000
DATA tq0<>+24(SB)/4, $0x3f800000
DATA tq0<>+28(SB)/4, $0x3f800000
GLOBL tq0<>(SB), RODATA|NOPTR, $32
DATA tq1<>+0(SB)/4, $0x3ef4de9c
DATA tq1<>+4(SB)/4, $0x3ef4de9c
DATA tq1<>+8(SB)/4, $0x3ef4de9c
DATA tq1<>+12(SB)/4, $0x3ef4de9c
DATA tq1<>+16(SB)/4, $0x3ef4de9c
DATA tq1<>+20(SB)/4, $0x3ef4de9c
DATA tq1<>+24(SB)/4, $0x3ef4de9c
DATA tq1<>+28(SB)/4, $0x3ef4de9c
GLOBL tq1<>(SB), RODATA|NOPTR, $32
DATA tq2<>+0(SB)/4, $0x3cfe68f2
DATA tq2<>+4(SB)/4, $0x3cfe68f2
DATA tq2<>+8(SB)/4, $0x3cfe68f2
DATA tq2<>+12(SB)/4, $0x3cfe68f2
DATA tq2<>+16(SB)/4, $0x3cfe68f2
DATA tq2<>+20(SB)/4, $0x3cfe68f2
DATA tq2<>+24(SB)/4, $0x3cfe68f2
DATA tq2<>+28(SB)/4, $0x3cfe68f2
GLOBL tq2<>(SB), RODATA|NOPTR, $32
DATA tq3<>+0(SB)/4, $0x3a1ff740
DATA tq3<>+4(SB)/4, $0x3a1ff740
DATA tq3<>+8(SB)/4, $0x3a1ff740
DATA tq3<>+12(SB)/4, $0x3a1ff740
DATA tq3<>+16(SB)/4, $0x3a1ff740
DATA tq3<>+20(SB)/4, $0x3a1ff740
DATA tq3<>+24(SB)/4, $0x3a1ff740
DATA tq3<>+28(SB)/4, $0x3a1ff740
GLOBL tq3<>(SB), RODATA|NOPTR, $32
DATA tq4<>+0(SB)/4, $0x368f6301
DATA tq4<>+4(SB)/4, $0x368f6301
DATA tq4<>+8(SB)/4, $0x368f6301
DATA tq4<>+12(SB)/4, $0x368f6301
DATA tq4<>+16(SB)/4, $0x368f6301
DATA tq4<>+20(SB)/4, $0x368f6301
DATA tq4<>+24(SB)/4, $0x368f6301
DATA tq4<>+28(SB)/4, $0x368f6301
GLOBL tq4<>(SB), RODATA|NOPTR, $32
DATA tq5<>+0(SB)/4, $0x3223246a
DATA tq5<>+4(SB)/4, $0x3223246a
DATA tq5<>+8(SB)/4, $0x3223246a
DATA tq5<>+12(SB)/4, $0x3223246a
DATA tq5<>+16(SB)/4, $0x3223246a
DATA tq5<>+20(SB)/4, $0x3223246a
DATA tq5<>+24(SB)/4, $0x3223246a
DATA tq5<>+28(SB)/4, $0x3223246a
GLOBL tq5<>(SB), RODATA|NOPTR, $32
DATA tq6<>+0(SB)/4, $0x2c5e8562
DATA tq6<>+4(SB)/4, $0x2c5e8562
DATA tq6<>+8(SB)/4, $0x2c5e8562
DATA tq6<>+12(SB)/4, $0x2c5e8562
DATA tq6<>+16(SB)/4, $0x2c5e8562
DATA tq6<>+20(SB)/4, $0x2c5e8562
DATA tq6<>+24(SB)/4, $0x2c5e8562
DATA tq6<>+28(SB)/4, $0x2c5e8562
GLOBL tq6<>(SB), RODATA|NOPTR, $32

// func adamAVX(w, grad, m, v *float32, n int, c *[7]float32)
// One Adam step on n (multiple of 8) elements, c = {β1, 1−β1, β2, 1−β2,
// ε, step, 1/√(1−β2ᵗ)}:
//   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  w ← w − step·m/(√v·rbc2 + ε)
TEXT ·adamAVX(SB), NOSPLIT, $8-48
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
	SHRQ $3, CX
	JZ   adone
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	VBROADCASTSS 16(AX), Y12
	VBROADCASTSS 20(AX), Y13
	VBROADCASTSS 24(AX), Y14

aloop:
	VMOVUPS (SI), Y0
	VMULPS (R8), Y8, Y1
	VFMADD231PS Y0, Y9, Y1
	VMOVUPS Y1, (R8)
	VMULPS Y0, Y0, Y2
	VMULPS (R9), Y10, Y3
	VFMADD231PS Y2, Y11, Y3
	VMOVUPS Y3, (R9)
	VSQRTPS Y3, Y4
	VFMADD213PS Y12, Y14, Y4
	VMULPS Y1, Y13, Y5
	VDIVPS Y4, Y5, Y5
	VMOVUPS (DI), Y6
	VSUBPS Y5, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  aloop

adone:
	LDMXCSR 4(SP)
	VZEROUPPER
	RET

// func transpose8AVX(dst *float32, ldd int, src *float32, lds int, nblk int)
// Transposes nblk 8×8 blocks lying side by side in src (block b is the 8
// rows from src, columns 8b…8b+7) into dst (block b's transpose is dst's
// rows 8b…8b+7, columns 0…7). ldd and lds are row strides in bytes.
// Unpack, shuffle and lane-permute steps, as the usual AVX 8×8 transpose.
TEXT ·transpose8AVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ nblk+32(FP), CX
	TESTQ CX, CX
	JZ   xdone
	LEAQ (R9)(R9*2), R10 // 3·lds
	LEAQ (R8)(R8*2), R11 // 3·ldd

xloop:
	MOVQ SI, AX
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(R9*1), Y1
	VMOVUPS (AX)(R9*2), Y2
	VMOVUPS (AX)(R10*1), Y3
	LEAQ (AX)(R9*4), AX
	VMOVUPS (AX), Y4
	VMOVUPS (AX)(R9*1), Y5
	VMOVUPS (AX)(R9*2), Y6
	VMOVUPS (AX)(R10*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	MOVQ DI, AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, (AX)(R8*1)
	VMOVUPS Y10, (AX)(R8*2)
	VMOVUPS Y11, (AX)(R11*1)
	LEAQ (AX)(R8*4), AX
	VMOVUPS Y12, (AX)
	VMOVUPS Y13, (AX)(R8*1)
	VMOVUPS Y14, (AX)(R8*2)
	VMOVUPS Y15, (AX)(R11*1)
	ADDQ $32, SI
	LEAQ (DI)(R8*8), DI
	DECQ CX
	JNZ  xloop

xdone:
	VZEROUPPER
	RET
