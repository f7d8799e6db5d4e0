; two lookups of one key: the second is not null only where it equals the checked first,
; and this reads it where they differ
; expect: NullableDeref
stdw [%r10-8], 0
mov %r2, %r10
add %r2, -8
lddw %r1, map[1]
call 1
mov %r6, %r0
mov %r2, %r10
add %r2, -8
lddw %r1, map[1]
call 1
mov %r7, %r0
jeq %r6, 0, out
jeq %r6, %r7, out
ldxdw %r0, [%r7+0]
out: mov %r0, 2
exit
