; queue_id read before the lookup is tested for NULL
; expect: NullableDeref
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
ldxw %r0, [%r0+0]
out: mov %r0, 2
exit
