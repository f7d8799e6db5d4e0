; adds a 64-bit value read from the packet to a packet pointer
; expect: PointerOffsetUnbounded
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
ldxdw %r5, [%r2+0]
add %r2, %r5
out: mov %r0, 1
exit
