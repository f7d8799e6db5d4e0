; the lock is taken through one of two elements chosen by a branch, and released
; through the other one on one path
; expect: UnlockOtherLock
ldxw %r8, [%r1+0]
stw [%r10-4], 0
stw [%r10-8], 1
mov %r2, %r10
add %r2, -4
lddw %r1, map[10]
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r2, %r10
add %r2, -8
lddw %r1, map[10]
call 1
jeq %r0, 0, out
mov %r7, %r0
mov %r9, %r6
jeq %r8, 0, take
mov %r9, %r7
take: mov %r1, %r9
add %r1, 8
call 93
mov %r1, %r6
add %r1, 8
call 94
out: mov %r0, 2
exit
