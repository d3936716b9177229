//go:build amd64 && !purego

#include "textflag.h"

// func rmspropAVX(w, grad, sq *float32, n int, c *[4]float32)
// One RMSProp step on n (multiple of 8) elements, c = {α, 1−α, lr, ε}:
//   sq ← α·sq + ((1−α)·g)·g;  w ← w − (lr·g)/(√sq + ε)
// Separate multiplies and adds (no FMA), as the scalar loop rounds.
TEXT ·rmspropAVX(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ sq+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), AX
	SHRQ $3, CX
	JZ   rdone
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y12

rloop:
	VMOVUPS (SI), Y0
	VMULPS (R9), Y8, Y3
	VMULPS Y0, Y9, Y2
	VMULPS Y0, Y2, Y2
	VADDPS Y2, Y3, Y3
	VMOVUPS Y3, (R9)
	VSQRTPS Y3, Y4
	VADDPS Y12, Y4, Y4
	VMULPS Y0, Y10, Y5
	VDIVPS Y4, Y5, Y5
	VMOVUPS (DI), Y6
	VSUBPS Y5, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R9
	DECQ CX
	JNZ  rloop

rdone:
	VZEROUPPER
	RET

// func rmspropCenteredAVX(w, grad, sq, avg *float32, n int, c *[4]float32) (done int)
// The centered step: sq ← α·sq + ((1−α)·g)·g;  avg ← α·avg + (1−α)·g;
//   w ← w − (lr·g)/(√(sq − avg·avg) + ε), and w unchanged where g = 0.
// It stops before the first block of 8 whose sq or avg holds a subnormal
// (0 < |x| < 2⁻¹²⁶, which would take the FPU's slow path) and returns the
// elements done.
TEXT ·rmspropCenteredAVX(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ sq+16(FP), R9
	MOVQ avg+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	XORQ DX, DX
	SHRQ $3, CX
	JZ   cdone
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y12
	VXORPS Y15, Y15, Y15
	MOVL $0x7fffffff, BX
	VMOVD BX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00800000, BX
	VMOVD BX, X14
	VPBROADCASTD X14, Y14

cloop:
	VMOVUPS (R9), Y3
	VMOVUPS (R8), Y1
	VPAND Y13, Y3, Y4
	VPCMPGTD Y4, Y14, Y5
	VPCMPEQD Y15, Y4, Y4
	VPANDN Y5, Y4, Y4
	VPAND Y13, Y1, Y6
	VPCMPGTD Y6, Y14, Y5
	VPCMPEQD Y15, Y6, Y6
	VPANDN Y5, Y6, Y6
	VPOR Y4, Y6, Y6
	VPTEST Y6, Y6
	JNZ  cdone
	VMOVUPS (SI), Y0
	VMULPS Y0, Y9, Y2
	VMULPS Y0, Y2, Y7
	VMULPS Y3, Y8, Y3
	VADDPS Y7, Y3, Y3
	VMOVUPS Y3, (R9)
	VMULPS Y1, Y8, Y1
	VADDPS Y2, Y1, Y1
	VMOVUPS Y1, (R8)
	VMULPS Y1, Y1, Y4
	VSUBPS Y4, Y3, Y4
	VSQRTPS Y4, Y4
	VADDPS Y12, Y4, Y4
	VMULPS Y0, Y10, Y5
	VDIVPS Y4, Y5, Y5
	VCMPPS $4, Y15, Y0, Y7
	VANDPS Y7, Y5, Y5
	VMOVUPS (DI), Y6
	VSUBPS Y5, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $8, DX
	DECQ CX
	JNZ  cloop

cdone:
	MOVQ DX, done+48(FP)
	VZEROUPPER
	RET
