//go:build amd64 && !purego

#include "textflag.h"

// func tanhAVX512(dst, x, c *float32, n int)
// tanhToGo for n a multiple of 16, 16 lanes per step: the operations of
// tanhAVX2 (unfused multiplies and adds, the same order), so every lane
// rounds where the scalar loop does.
//
// Each piece's 4 coefficients are 16 bytes of c, read as two 8-byte
// halves (c₀,c₁) and (c₂,c₃) by four qword gathers of 8 lanes each. The
// lanes are gathered in the order 0 1 4 5 8 9 12 13 | 2 3 6 7 10 11 14 15
// so that one in-lane VSHUFPS of two gathers yields a coefficient for all
// 16 lanes in their natural order.
TEXT ·tanhAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ c+16(FP), BX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   zdone
	VPBROADCASTD tzabs<>(SB), Z8    // ^(1<<31)
	VBROADCASTSS tzmax<>(SB), Z9    // tanhMax
	VBROADCASTSS tzper<>(SB), Z10   // tanhPerUnit
	VPBROADCASTD tzlast<>(SB), Z11  // tanhPieces-1
	VMOVDQU32    tzorder<>(SB), Z12 // gather order of the lanes

zloop:
	VMOVUPS (SI), Z0               // v
	VPANDD  Z8, Z0, Z1             // a := |v|
	VMINPS  Z9, Z1, Z1             // a := min(a, tanhMax); NaN gives tanhMax
	VMULPS  Z10, Z1, Z1            // u := a * tanhPerUnit
	VCVTTPS2DQ Z1, Z2              // int(u), truncated
	VPMINSD Z11, Z2, Z2            // k := min(int(u), tanhPieces-1)
	VCVTDQ2PS Z2, Z3               // float32(k)
	VSUBPS  Z3, Z1, Z1             // s := u - float32(k)
	VPSLLD  $4, Z2, Z2             // 16k: the byte offset of piece k
	VPERMD  Z2, Z12, Z2            // lanes in gather order
	VEXTRACTI64X4 $1, Z2, Y3
	KXNORW  K0, K0, K1
	KXNORW  K0, K0, K2
	KXNORW  K0, K0, K3
	KXNORW  K0, K0, K4
	VPXORD  Z4, Z4, Z4
	VPXORD  Z5, Z5, Z5
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7
	VPGATHERDQ (BX)(Y2*1), K1, Z4  // (c₀,c₁) of lanes 0 1 4 5 8 9 12 13
	VPGATHERDQ 8(BX)(Y2*1), K2, Z5 // (c₂,c₃) of the same
	VPGATHERDQ (BX)(Y3*1), K3, Z6  // (c₀,c₁) of lanes 2 3 6 7 10 11 14 15
	VPGATHERDQ 8(BX)(Y3*1), K4, Z7 // (c₂,c₃) of the same
	VSHUFPS $0xdd, Z7, Z5, Z13     // p[3]
	VSHUFPS $0x88, Z7, Z5, Z14     // p[2]
	VSHUFPS $0xdd, Z6, Z4, Z15     // p[1]
	VSHUFPS $0x88, Z6, Z4, Z16     // p[0]
	VMULPS  Z13, Z1, Z13           // s*p[3]
	VADDPS  Z13, Z14, Z13          // p[2]+s*p[3]
	VMULPS  Z13, Z1, Z13           // s*(…)
	VADDPS  Z13, Z15, Z13          // p[1]+s*(…)
	VMULPS  Z13, Z1, Z13           // s*(…)
	VADDPS  Z13, Z16, Z13          // t := p[0]+s*(…)
	VPANDND Z0, Z8, Z5             // bits & (1<<31)
	VPORD   Z5, Z13, Z13           // t | sign
	VMOVUPS Z13, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  zloop

zdone:
	VZEROUPPER
	RET

// func tanhBackAVX512(dx, dy, y *float32, n int)
// dx[i] = dy[i] * (1 - y[i]*y[i]) for n a multiple of 16, unfused like the
// Go loop.
TEXT ·tanhBackAVX512(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   zbdone
	VBROADCASTSS tzone<>(SB), Z8

zbloop:
	VMOVUPS (DX), Z0
	VMULPS  Z0, Z0, Z0             // v*v
	VSUBPS  Z0, Z8, Z0             // 1 - v*v
	VMULPS  (SI), Z0, Z0           // dy[i] * (…)
	VMOVUPS Z0, (DI)
	ADDQ $64, DX
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  zbloop

zbdone:
	VZEROUPPER
	RET

DATA tzone<>+0(SB)/4, $0x3f800000
GLOBL tzone<>(SB), RODATA|NOPTR, $4
DATA tzabs<>+0(SB)/4, $0x7fffffff
GLOBL tzabs<>(SB), RODATA|NOPTR, $4
DATA tzmax<>+0(SB)/4, $0x41200000
GLOBL tzmax<>(SB), RODATA|NOPTR, $4
DATA tzper<>+0(SB)/4, $0x42000000
GLOBL tzper<>(SB), RODATA|NOPTR, $4
DATA tzlast<>+0(SB)/4, $319
GLOBL tzlast<>(SB), RODATA|NOPTR, $4
DATA tzorder<>+0(SB)/4, $0
DATA tzorder<>+4(SB)/4, $1
DATA tzorder<>+8(SB)/4, $4
DATA tzorder<>+12(SB)/4, $5
DATA tzorder<>+16(SB)/4, $8
DATA tzorder<>+20(SB)/4, $9
DATA tzorder<>+24(SB)/4, $12
DATA tzorder<>+28(SB)/4, $13
DATA tzorder<>+32(SB)/4, $2
DATA tzorder<>+36(SB)/4, $3
DATA tzorder<>+40(SB)/4, $6
DATA tzorder<>+44(SB)/4, $7
DATA tzorder<>+48(SB)/4, $10
DATA tzorder<>+52(SB)/4, $11
DATA tzorder<>+56(SB)/4, $14
DATA tzorder<>+60(SB)/4, $15
GLOBL tzorder<>(SB), RODATA|NOPTR, $64
