; sums the eight u64 slots of a map value
; expect: accept
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out
mov %r1, 0
mov %r6, 0
loop: mov %r2, %r1
lsh %r2, 3
mov %r3, %r0
add %r3, %r2
ldxdw %r4, [%r3+0]
add %r6, %r4
add %r1, 1
jlt %r1, 8, loop
stxdw [%r0+0], %r6
out: mov %r0, 2
exit
