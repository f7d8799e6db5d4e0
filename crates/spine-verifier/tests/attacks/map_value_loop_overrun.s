; a loop that walks one slot past the end of a 64-byte value
; expect: MapValueOutOfBounds
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

mov %r1, 0
loop: mov %r2, %r1
lsh %r2, 3
mov %r3, %r0
add %r3, %r2
ldxdw %r4, [%r3+0]
add %r1, 1
jle %r1, 8, loop
out: mov %r0, 2
exit
