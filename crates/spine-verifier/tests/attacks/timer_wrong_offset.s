; bpf_timer_init on the value's start, not on its timer at offset 8
; expect: TimerOffset
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
lddw %r2, map[13]
mov %r3, 1
call 169
out: mov %r0, 2
exit
