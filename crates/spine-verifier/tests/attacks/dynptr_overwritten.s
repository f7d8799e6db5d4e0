; stores over a dynptr bpf_dynptr_from_xdp made (spine refuses it; the kernel destroys
; the dynptr)
; expect: DynptrAccess
mov %r6, %r1
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
stdw [%r10-8], 7
mov %r0, 2
exit
