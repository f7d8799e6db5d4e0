; compares packet pointers with a 32-bit jump
; expect: PointerComparison
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 14
jgt32 %r4, %r3, out
ldxb %r0, [%r2+0]
out: mov %r0, 1
exit
