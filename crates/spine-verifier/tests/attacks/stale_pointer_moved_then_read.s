; moves a packet pointer kept across bpf_xdp_adjust_head (allowed: it stays
; invalidated) and reads through it
; expect: InvalidMemAccess
mov %r6, %r1
ldxw %r7, [%r6+0]
ldxw %r8, [%r6+4]
mov %r4, %r7
add %r4, 14
jgt %r4, %r8, out
mov %r1, %r6
mov %r2, 4
call 44
add %r7, 4
ldxb %r0, [%r7+0]
out: mov %r0, 2
exit
