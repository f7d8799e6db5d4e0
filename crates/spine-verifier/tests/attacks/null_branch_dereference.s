; dereferences on the branch where the pointer is NULL
; expect: InvalidMemAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jne %r0, 0, out
ldxdw %r1, [%r0+0]
out: mov %r0, 2
exit
