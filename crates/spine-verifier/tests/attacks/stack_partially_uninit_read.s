; writes 4 bytes and reads 8
; expect: UninitStack
stw [%r10-8], 1
ldxdw %r0, [%r10-8]
exit
