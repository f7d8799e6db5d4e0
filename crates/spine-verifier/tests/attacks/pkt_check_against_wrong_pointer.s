; compares against another packet pointer instead of data_end
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r5, %r2
add %r5, 20
mov %r4, %r2
add %r4, 14
jgt %r4, %r5, out
ldxh %r0, [%r2+12]
out: mov %r0, 1
exit
