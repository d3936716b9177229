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

// func rmspropCenteredAVX(w, grad, sq, avg *float32, n int, c *[4]float32)
// The centered step: sq ← α·sq + ((1−α)·g)·g;  avg ← α·avg + (1−α)·g;
//   w ← w − (lr·g)/(√(sq − avg·avg) + ε), and w unchanged where g = 0.
TEXT ·rmspropCenteredAVX(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ sq+16(FP), R9
	MOVQ avg+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	SHRQ $3, CX
	JZ   cdone
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y12
	VXORPS Y15, Y15, Y15

cloop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y9, Y2
	VMULPS Y0, Y2, Y7
	VMULPS (R9), Y8, Y3
	VADDPS Y7, Y3, Y3
	VMOVUPS Y3, (R9)
	VMULPS (R8), Y8, Y1
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
	DECQ CX
	JNZ  cloop

cdone:
	VZEROUPPER
	RET
