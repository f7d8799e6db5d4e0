; moves data_end
; expect: PointerArithProhibited
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

add %r3, 16
mov %r0, 2
exit
