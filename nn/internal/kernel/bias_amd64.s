//go:build amd64 && !purego

#include "textflag.h"

// func addBiasAVX(x *float32, n int, b float32, relu bool)
// x[i] += b for n a multiple of 8; with relu then x[i] = max(x[i], 0) as
// Go's max: a lane keeps its sum where !(s <= 0) (positive or NaN,
// compare predicate NLE_UQ) and becomes +0 otherwise.
TEXT ·addBiasAVX(SB), NOSPLIT, $0-21
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS b+16(FP), Y8
	MOVBLZX relu+20(FP), AX
	VXORPS Y9, Y9, Y9
	SHRQ $3, CX
	JZ   done
	TESTQ AX, AX
	JNZ  rloop

aloop:
	VADDPS (DI), Y8, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  aloop
	JMP  done

rloop:
	VADDPS (DI), Y8, Y0
	VCMPPS $0x06, Y9, Y0, Y1
	VANDPS Y0, Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNZ  rloop

done:
	VZEROUPPER
	RET
