; tail-calls while holding a ring-buffer record
; expect: TailCallWithReference
mov %r6, %r1
lddw %r1, map[5]
mov %r2, 16
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r7, %r0
mov %r1, %r6
lddw %r2, map[3]
mov %r3, 0
call 12
mov %r1, %r7
mov %r2, 0
call 133
out: mov %r0, 2
exit
