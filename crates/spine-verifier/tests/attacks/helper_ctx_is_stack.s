; passes a stack pointer as bpf_xdp_adjust_head's context
; expect: HelperArgType
mov %r1, %r10
mov %r2, 4
call 44
mov %r0, 2
exit
