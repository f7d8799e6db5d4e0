; bpf_loop with an iteration count taken from the packet metadata
; expect: accept
ldxw %r1, [%r1+16]
.insn 0x0000000600004218
.insn 0
mov %r3, 0
mov %r4, 0
call 181
mov %r0, 2
exit
cb: mov %r0, 0
exit
