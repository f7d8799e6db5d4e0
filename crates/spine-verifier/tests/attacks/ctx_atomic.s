; an atomic add into the context
; expect: AtomicNotAllowed
mov %r2, 1
lock add32 [%r1+12], %r2
mov %r0, 2
exit
