; multiplies a stack pointer
; expect: PointerOpProhibited
mov %r2, %r10
mul %r2, 2
mov %r0, 2
exit
