; moves the context pointer
; expect: PointerArithProhibited
add %r1, 4
ldxw %r0, [%r1+0]
exit
