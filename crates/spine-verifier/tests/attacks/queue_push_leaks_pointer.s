; pushes a spilled pointer into a queue, where user space reads it
; expect: PointerLeak
stxdw [%r10-8], %r10
mov %r2, %r10
add %r2, -8
lddw %r1, map[11]
mov %r3, 0
call 87
mov %r0, 2
exit
