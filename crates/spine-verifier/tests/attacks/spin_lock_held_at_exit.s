; returns while holding a lock
; expect: ExitWithLock
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[9]
call 1
jeq %r0, 0, out

mov %r1, %r0
call 93
out: mov %r0, 2
exit
