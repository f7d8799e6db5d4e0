; reads 8 bytes at offset 60 of a 64-byte value
; expect: MapValueOutOfBounds
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

ldxdw %r1, [%r0+60]
out: mov %r0, 2
exit
