; a callee stores a pointer to its own frame into its caller's
; expect: StackPointerToCaller
mov %r1, %r10
add %r1, -8
call local f
mov %r0, 2
exit
f: mov %r2, %r10
add %r2, -8
stxdw [%r1+0], %r2
mov %r0, 0
exit
