; checks 14 bytes, reads 4 bytes at offset 12
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxw %r0, [%r2+12]
out: mov %r0, 1
exit
