; the same on data: data + 65536 <= data_end proves nothing about data's first byte
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 65536
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out: mov %r0, 2
exit
