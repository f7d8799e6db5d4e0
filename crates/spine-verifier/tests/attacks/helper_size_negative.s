; a checksum length that may be negative
; expect: HelperSizeNegative
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxsb %r4, [%r2+0]
stdw [%r10-8], 0
mov %r1, 0
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 28
out: mov %r0, 2
exit
