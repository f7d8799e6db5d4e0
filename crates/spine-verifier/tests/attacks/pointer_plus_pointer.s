; adds two packet pointers
; expect: PointerPointerArith
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

add %r2, %r3
mov %r0, 2
exit
