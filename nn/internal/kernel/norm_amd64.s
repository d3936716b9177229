//go:build amd64 && !purego

#include "textflag.h"

// func sumSquaresAVX(x *float32, n int) float64
// sumSquaresGo for n a multiple of 32: accumulator Yq holds the partial
// sums 4q…4q+3, each fed by one fused multiply-add per block (exact
// squares, so the same rounding as the Go loop's add), then the same tree.
TEXT ·sumSquaresAVX(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7

sloop:
	VCVTPS2PD 0(SI), Y8
	VCVTPS2PD 16(SI), Y9
	VCVTPS2PD 32(SI), Y10
	VCVTPS2PD 48(SI), Y11
	VFMADD231PD Y8, Y8, Y0
	VFMADD231PD Y9, Y9, Y1
	VFMADD231PD Y10, Y10, Y2
	VFMADD231PD Y11, Y11, Y3
	VCVTPS2PD 64(SI), Y8
	VCVTPS2PD 80(SI), Y9
	VCVTPS2PD 96(SI), Y10
	VCVTPS2PD 112(SI), Y11
	VFMADD231PD Y8, Y8, Y4
	VFMADD231PD Y9, Y9, Y5
	VFMADD231PD Y10, Y10, Y6
	VFMADD231PD Y11, Y11, Y7
	ADDQ $128, SI
	DECQ CX
	JNZ  sloop

	// t_l for l < 4 in Y0, for l ≥ 4 in Y1:
	// (p_l + p_{l+8}) + (p_{l+16} + p_{l+24}).
	VADDPD Y2, Y0, Y0
	VADDPD Y6, Y4, Y4
	VADDPD Y4, Y0, Y0
	VADDPD Y3, Y1, Y1
	VADDPD Y7, Y5, Y5
	VADDPD Y5, Y1, Y1
	VADDPD Y1, Y0, Y0              // u_l = t_l + t_{l+4}
	VEXTRACTF128 $1, Y0, X1
	VADDPD X1, X0, X0              // u_l + u_{l+2}
	VPERMILPD $1, X0, X1
	VADDSD X1, X0, X0              // the two left
	VZEROUPPER
	MOVSD X0, ret+16(FP)
	RET

// func scaleAVX(x *float32, n int, c float32)
// x[i] *= c for n a multiple of 8.
TEXT ·scaleAVX(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS c+16(FP), Y8
	MOVQ CX, DX
	SHRQ $5, DX
	JZ   c8

c32:
	VMULPS 0(SI), Y8, Y0
	VMULPS 32(SI), Y8, Y1
	VMULPS 64(SI), Y8, Y2
	VMULPS 96(SI), Y8, Y3
	VMOVUPS Y0, 0(SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	ADDQ $128, SI
	DECQ DX
	JNZ  c32

c8:
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   cdone

c8loop:
	VMULPS 0(SI), Y8, Y0
	VMOVUPS Y0, 0(SI)
	ADDQ $32, SI
	DECQ CX
	JNZ  c8loop

cdone:
	VZEROUPPER
	RET
