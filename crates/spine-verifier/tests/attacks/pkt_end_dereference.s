; reads through data_end
; expect: InvalidMemAccess
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

ldxb %r0, [%r3-1]
exit
