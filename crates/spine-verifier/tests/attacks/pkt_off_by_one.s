; checks 14 bytes, reads the byte at offset 14
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r2+14]
out: mov %r0, 1
exit
