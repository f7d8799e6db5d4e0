; spills the context pointer and reads back half of it
; expect: InvalidSpillSize
stxdw [%r10-8], %r1
ldxw %r0, [%r10-8]
exit
