; moves a maybe-NULL pointer before checking it
; expect: PointerArithProhibited
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
add %r0, 8
jeq %r0, 0, out
ldxdw %r1, [%r0+0]
out: mov %r0, 2
exit
