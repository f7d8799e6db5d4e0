; ORs bits into a packet pointer
; expect: PointerOpProhibited
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

or %r2, 1
mov %r0, 2
exit
