; returns the context pointer as the verdict
; expect: PointerLeak
mov %r0, %r1
exit
