; writes the packet without a bounds check
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

stb [%r2+0], 1
mov %r0, 3
exit
