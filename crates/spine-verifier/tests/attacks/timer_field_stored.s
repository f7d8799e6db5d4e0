; forges a timer by writing over the bpf_timer field (one byte of it)
; expect: TimerAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
stb [%r6+23], 1
out: mov %r0, 2
exit
