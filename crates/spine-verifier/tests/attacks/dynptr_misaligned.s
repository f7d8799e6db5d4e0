; makes a dynptr at a stack offset that is not 8-byte aligned
; expect: DynptrOffset
mov %r2, 0
mov %r3, %r10
add %r3, -20
call 1397752065
mov %r0, 2
exit
