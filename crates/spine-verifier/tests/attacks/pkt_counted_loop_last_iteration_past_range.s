; a counted loop reading the byte at 24 + i for i = 0..40 with 64 bytes proven: only
; the last iteration reads past the range, and unrolling must reach it
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 64
jgt %r4, %r3, out
mov %r6, 0
loop: mov %r7, %r2
add %r7, %r6
ldxb %r0, [%r7+24]
add %r6, 1
jle %r6, 40, loop
out: mov %r0, 2
exit
