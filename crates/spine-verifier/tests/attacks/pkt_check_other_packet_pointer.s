; checks a pointer with a different variable offset than the one read
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 15
mov %r6, %r2
add %r6, %r5
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
ldxw %r0, [%r6+4]
out: mov %r0, 1
exit
