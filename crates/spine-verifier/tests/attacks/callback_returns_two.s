; a bpf_loop callback returning 2
; expect: CallbackReturn
mov %r1, 4
.insn 0x0000000600004218
.insn 0
mov %r3, 0
mov %r4, 0
call 181
mov %r0, 2
exit
cb: mov %r0, 2
exit
