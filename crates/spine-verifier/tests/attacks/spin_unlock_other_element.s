; locks key 0's element of a hash map and unlocks key 1's: the same map and offset,
; told apart only by the pointers' ids
; expect: UnlockOtherLock
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
mov %r1, %r6
add %r1, 8
call 93
mov %r1, %r7
add %r1, 8
call 94
out: mov %r0, 2
exit
