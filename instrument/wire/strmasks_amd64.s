//go:build !purego

#include "textflag.h"

// Sixteen copies of each byte strMasks compares against.
DATA strConst<>+0x00(SB)/8, $0x2222222222222222 // '"'
DATA strConst<>+0x08(SB)/8, $0x2222222222222222
DATA strConst<>+0x10(SB)/8, $0x5c5c5c5c5c5c5c5c // '\\'
DATA strConst<>+0x18(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA strConst<>+0x20(SB)/8, $0x1f1f1f1f1f1f1f1f // the largest control character
DATA strConst<>+0x28(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA strConst<>+0x30(SB)/8, $0x2f2f2f2f2f2f2f2f // '/'
DATA strConst<>+0x38(SB)/8, $0x2f2f2f2f2f2f2f2f
DATA strConst<>+0x40(SB)/8, $0x6262626262626262 // 'b'
DATA strConst<>+0x48(SB)/8, $0x6262626262626262
DATA strConst<>+0x50(SB)/8, $0x6666666666666666 // 'f'
DATA strConst<>+0x58(SB)/8, $0x6666666666666666
DATA strConst<>+0x60(SB)/8, $0x6e6e6e6e6e6e6e6e // 'n'
DATA strConst<>+0x68(SB)/8, $0x6e6e6e6e6e6e6e6e
DATA strConst<>+0x70(SB)/8, $0x7272727272727272 // 'r'
DATA strConst<>+0x78(SB)/8, $0x7272727272727272
DATA strConst<>+0x80(SB)/8, $0x7474747474747474 // 't'
DATA strConst<>+0x88(SB)/8, $0x7474747474747474
GLOBL strConst<>(SB), RODATA|NOPTR, $0x90

// One 16-byte chunk at off(SI): its bits go to bit shift on of R8 to R11. X1 gets the quotes,
// X2 the backslashes, X3 the control characters (min(x, 0x1f) == x) and X4 the bytes equal to
// '/', 'b', 'f', 'n', 'r', 't', '"' or '\\'. X0 to X5 are scratch; X6 to X14 hold the
// constants. X15 is left alone (Go's ABIInternal keeps zero there).
#define CHUNK(off, shift) \
	MOVOU off(SI), X0; \
	MOVO  X0, X1; \
	PCMPEQB X6, X1; \
	MOVO  X0, X2; \
	PCMPEQB X7, X2; \
	MOVO  X0, X3; \
	PMINUB X8, X3; \
	PCMPEQB X0, X3; \
	MOVO  X0, X4; \
	PCMPEQB X9, X4; \
	MOVO  X0, X5; \
	PCMPEQB X10, X5; \
	POR   X5, X4; \
	MOVO  X0, X5; \
	PCMPEQB X11, X5; \
	POR   X5, X4; \
	MOVO  X0, X5; \
	PCMPEQB X12, X5; \
	POR   X5, X4; \
	MOVO  X0, X5; \
	PCMPEQB X13, X5; \
	POR   X5, X4; \
	PCMPEQB X14, X0; \
	POR   X0, X4; \
	POR   X1, X4; \
	POR   X2, X4; \
	PMOVMSKB X1, AX; \
	SHLQ  $shift, AX; \
	ORQ   AX, R8; \
	PMOVMSKB X2, AX; \
	SHLQ  $shift, AX; \
	ORQ   AX, R9; \
	PMOVMSKB X3, AX; \
	SHLQ  $shift, AX; \
	ORQ   AX, R10; \
	PMOVMSKB X4, AX; \
	SHLQ  $shift, AX; \
	ORQ   AX, R11

// func strMasks(b []byte) (quote, backslash, control, escapable uint64)
TEXT ·strMasks(SB), NOSPLIT, $0-56
	MOVQ b_base+0(FP), SI
	MOVOU strConst<>+0x00(SB), X6
	MOVOU strConst<>+0x10(SB), X7
	MOVOU strConst<>+0x20(SB), X8
	MOVOU strConst<>+0x30(SB), X9
	MOVOU strConst<>+0x40(SB), X10
	MOVOU strConst<>+0x50(SB), X11
	MOVOU strConst<>+0x60(SB), X12
	MOVOU strConst<>+0x70(SB), X13
	MOVOU strConst<>+0x80(SB), X14
	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10
	XORQ R11, R11
	CHUNK(0, 0)
	CHUNK(16, 16)
	CHUNK(32, 32)
	CHUNK(48, 48)
	MOVQ R8, quote+24(FP)
	MOVQ R9, backslash+32(FP)
	MOVQ R10, control+40(FP)
	MOVQ R11, escapable+48(FP)
	RET
