; a bpf_loop callback reads past the caller's buffer it was given
; expect: StackOutOfBounds
stdw [%r10-8], 0
mov %r1, 4
.insn 0x0000000700004218
.insn 0
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 181
mov %r0, 2
exit
cb: ldxdw %r0, [%r2+8]
mov %r0, 0
exit
