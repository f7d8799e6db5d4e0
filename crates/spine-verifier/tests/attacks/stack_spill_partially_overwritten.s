; overwrites half a spilled pointer and reads the whole slot as a number
; expect: UninitStack
stxdw [%r10-8], %r1
stw [%r10-8], 0
ldxdw %r0, [%r10-8]
exit
