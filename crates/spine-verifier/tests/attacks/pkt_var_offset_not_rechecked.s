; adds a bounded index after the check and reads without checking again
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 64
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 63
add %r2, %r5
ldxb %r0, [%r2+1]
out: mov %r0, 1
exit
