; a callee returns a pointer to its own frame
; expect: ReturnStackPointer
call local f
mov %r0, 2
exit
f: mov %r0, %r10
add %r0, -8
exit
