; 256 paths meet with distinct offsets into the packet (more than a prune point once
; kept apart); only the last one reads a byte past its proven range
; expect: PacketOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
ldxw %r4, [%r1+12]
mov %r7, 0
mov %r5, %r4
and %r5, 1
jeq %r5, 0, s0
add %r7, 1
s0: mov %r0, 0
mov %r5, %r4
and %r5, 2
jeq %r5, 0, s1
add %r7, 2
s1: mov %r0, 0
mov %r5, %r4
and %r5, 4
jeq %r5, 0, s2
add %r7, 4
s2: mov %r0, 0
mov %r5, %r4
and %r5, 8
jeq %r5, 0, s3
add %r7, 8
s3: mov %r0, 0
mov %r5, %r4
and %r5, 16
jeq %r5, 0, s4
add %r7, 16
s4: mov %r0, 0
mov %r5, %r4
and %r5, 32
jeq %r5, 0, s5
add %r7, 32
s5: mov %r0, 0
mov %r5, %r4
and %r5, 64
jeq %r5, 0, s6
add %r7, 64
s6: mov %r0, 0
mov %r5, %r4
and %r5, 128
jeq %r5, 0, s7
add %r7, 128
s7: mov %r0, 0
mov %r5, %r2
add %r5, %r7
mov %r0, %r5
add %r0, 8
jgt %r0, %r3, out
jne %r7, 255, ok
ldxdw %r0, [%r5+1]
ok: ldxdw %r0, [%r5+0]
out: mov %r0, 2
exit
