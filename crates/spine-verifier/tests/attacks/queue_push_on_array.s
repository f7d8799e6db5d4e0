; pushes onto an array: push, pop and peek are for queues and stacks only
; expect: MapTypeMismatch
stdw [%r10-8], 0
mov %r2, %r10
add %r2, -8
lddw %r1, map[0]
mov %r3, 0
call 87
mov %r0, 2
exit
