; bounds a metadata pointer by data_end instead of data
; expect: PacketOutOfBounds
ldxw %r2, [%r1+8]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r0, [%r2+0]
out: mov %r0, 2
exit
