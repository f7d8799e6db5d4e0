; releases a lock by storing to its word instead of calling bpf_spin_unlock
; expect: SpinLockAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[9]
call 1
jeq %r0, 0, out

mov %r6, %r0
mov %r1, %r6
call 93
stdw [%r6+0], 0
out: mov %r0, 2
exit
