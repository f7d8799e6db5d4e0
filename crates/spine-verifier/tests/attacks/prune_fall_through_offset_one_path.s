; the offset added to a packet pointer after a check is 8 on the first path explored and
; 64 on the second; the state cached at the check's fall-through holds the offset, which
; the read depends on, so it must be compared and the second path refused
; expect: PacketOutOfBounds
ldxw %r6, [%r1+0]
ldxw %r7, [%r1+4]
ldxw %r8, [%r1+12]
mov %r9, 64
jeq %r8, 0, join
mov %r9, 8
join: mov %r2, %r6
add %r2, 16
jgt %r2, %r7, out
add %r6, %r9
ldxb %r0, [%r6+0]
out: mov %r0, 2
exit
