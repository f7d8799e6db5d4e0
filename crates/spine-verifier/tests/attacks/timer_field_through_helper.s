; hands a value holding a bpf_timer to a helper that reads the whole value
; expect: TimerAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
stw [%r10-8], 1
mov %r2, %r10
add %r2, -8
mov %r3, %r6
mov %r4, 0
lddw %r1, map[13]
call 2
out: mov %r0, 2
exit
