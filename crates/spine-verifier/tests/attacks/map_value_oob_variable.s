; indexes a 64-byte value by a byte from the packet
; expect: MapValueOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r6, [%r2+0]
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

add %r0, %r6
ldxb %r1, [%r0+0]
out: mov %r0, 2
exit
