; dereferences a lookup result without a null check
; expect: NullableDeref
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
ldxdw %r0, [%r0+0]
mov %r0, 2
exit
