; a 32-bit index may wrap the address, so a later check proves nothing
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r5, [%r2+0]
add %r2, %r5
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out: mov %r0, 1
exit
