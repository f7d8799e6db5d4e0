; uses r3 after a bpf-to-bpf call
; expect: UninitRegister
mov %r3, 1
call local f
mov %r0, %r3
exit
f: mov %r0, 0
exit
