; one path bounds r9 to 0..7 before a packet check, the other leaves it unbounded; after
; the check both use it as a variable offset into the packet: the state cached at the
; check's fall-through must keep r9's bounds (it is used in pointer arithmetic)
; expect: PacketOutOfBounds
ldxw %r6, [%r1+0]
ldxw %r7, [%r1+4]
ldxw %r9, [%r1+12]
ldxw %r8, [%r1+16]
jeq %r8, 0, join
and %r9, 7
join: mov %r2, %r6
add %r2, 16
jgt %r2, %r7, out
add %r6, %r9
ldxb %r0, [%r6+8]
out: mov %r0, 2
exit
