; reads the bytes of a dynptr as a number
; expect: DynptrAccess
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
ldxdw %r0, [%r10-16]
exit
