; reads a stack slot never written
; expect: UninitStack
ldxdw %r0, [%r10-8]
exit
