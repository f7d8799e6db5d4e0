; 32-bit arithmetic on a packet pointer
; expect: PointerOpProhibited
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

add32 %r2, 4
mov %r0, 2
exit
