; `p + 14 >= end` taken means nothing; the fall-through proves 15 bytes, reads 16
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 14
jge %r4, %r3, out
ldxh %r0, [%r2+14]
out: mov %r0, 1
exit
