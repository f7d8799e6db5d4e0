; bpf_timer_init on a value whose type holds no bpf_timer
; expect: NoTimer
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out
mov %r1, %r0
add %r1, 8
lddw %r2, map[0]
mov %r3, 1
call 169
out: mov %r0, 2
exit
