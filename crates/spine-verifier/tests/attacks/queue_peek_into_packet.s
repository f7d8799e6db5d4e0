; peeks into the packet: pop and peek have no packet access in the kernel
; expect: HelperArgType
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, +3
lddw %r1, map[11]
call 89
mov %r0, 2
exit
