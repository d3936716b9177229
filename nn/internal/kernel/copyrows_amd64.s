//go:build amd64 && !purego

#include "textflag.h"

// func copyRowsAVX(dst, src *float32, rows, w, lds int)
// Copies rows rows of w ≥ 8 floats (source rows lds floats apart) to dst,
// 8 floats per move; a row's last 8 floats are moved by one more move
// ending at the row's end, which may overlap the one before it.
TEXT ·copyRowsAVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), CX
	MOVQ w+24(FP), DX
	MOVQ lds+32(FP), R8
	SHLQ $2, R8
	LEAQ -32(DX*4), R9

row:
	XORQ AX, AX

chunk:
	CMPQ AX, R9
	JGE  last
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	JMP  chunk

last:
	VMOVUPS (SI)(R9*1), Y0
	VMOVUPS Y0, (DI)(R9*1)
	ADDQ R8, SI
	LEAQ (DI)(DX*4), DI
	DECQ CX
	JNZ  row
	VZEROUPPER
	RET
