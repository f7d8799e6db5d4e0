; bounds-checks on one side of a branch only, then reads after the paths meet
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

ldxw %r5, [%r1+12]
jeq %r5, 1, skip
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
skip: ldxh %r0, [%r2+12]
out: mov %r0, 1
exit
