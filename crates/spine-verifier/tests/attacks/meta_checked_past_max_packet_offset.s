; compares data_meta + 65536 with data, then reads data_meta: an offset past the
; largest packet proves no range (the kernel's MAX_PACKET_OFF), so the read is unchecked
; expect: PacketOutOfBounds
ldxw %r2, [%r1+8]
ldxw %r3, [%r1+0]
mov %r4, %r2
add %r4, 65535
add %r4, 1
jgt %r4, %r3, out
ldxb %r0, [%r2+0]
out: mov %r0, 2
exit
