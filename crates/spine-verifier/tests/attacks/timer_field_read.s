; reads the second word of the value's bpf_timer directly
; expect: TimerAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
ldxdw %r0, [%r6+16]
out: mov %r0, 2
exit
