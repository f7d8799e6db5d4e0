; null-checks the second lookup and dereferences the first
; expect: NullableDeref
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
mov %r6, %r0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out
ldxdw %r0, [%r6+0]
out: mov %r0, 2
exit
