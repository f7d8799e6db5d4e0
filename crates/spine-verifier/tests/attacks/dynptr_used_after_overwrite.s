; stores over a dynptr bpf_dynptr_from_xdp made, which destroys it (as in the kernel),
; then slices it
; expect: DynptrUninit
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
stdw [%r10-8], 7
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
mov %r4, 8
call 1397752066
mov %r0, 2
exit
