; spills 4 bytes of a pointer
; expect: InvalidSpillSize
stxw [%r10-8], %r1
mov %r0, 2
exit
