; two paths reach the fall-through of a 16-byte packet check: the first proved 32 bytes
; before it, the second nothing; the read at 24..32 is safe on the first only, so the
; state cached after the check (range 32) must not cover the second (range 16)
; expect: PacketOutOfBounds
ldxw %r6, [%r1+0]
ldxw %r7, [%r1+4]
ldxw %r8, [%r1+12]
jeq %r8, 0, join
mov %r2, %r6
add %r2, 32
jgt %r2, %r7, out
join: mov %r2, %r6
add %r2, 16
jgt %r2, %r7, out
ldxdw %r0, [%r6+24]
out: mov %r0, 2
exit
