; a callee takes the lock and returns with it held (allowed), but the program then
; exits without releasing it
; expect: ExitWithLock
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[10]
call 1
jeq %r0, 0, out
mov %r1, %r0
call local take
out: mov %r0, 2
exit
take: add %r1, 8
call 93
mov %r0, 0
exit
