; indexes the value by a full 32-bit number
; expect: UnboundedAccess
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r6, [%r2+0]
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

add %r0, %r6
ldxb %r1, [%r0+0]
out: mov %r0, 2
exit
