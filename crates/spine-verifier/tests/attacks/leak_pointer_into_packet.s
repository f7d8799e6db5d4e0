; stores the context pointer into the packet
; expect: PointerLeak
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
stxdw [%r2+0], %r1
out: mov %r0, 2
exit
