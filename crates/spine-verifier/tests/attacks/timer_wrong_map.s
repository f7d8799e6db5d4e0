; bpf_timer_init naming another map than the one the timer lives in
; expect: TimerMapMismatch
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
add %r1, 8
lddw %r2, map[14]
mov %r3, 1
call 169
out: mov %r0, 2
exit
