; passes the context as a map key
; expect: HelperArgType
mov %r2, %r1
lddw %r1, map[0]
call 1
mov %r0, 2
exit
