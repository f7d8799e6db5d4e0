; one load reads the context on one path and the stack on the other
; expect: MixedCtxAccess
stdw [%r10-8], 0
mov %r6, %r1
call 7
jeq %r0, 0, load
mov %r6, %r10
add %r6, -8
load: ldxw %r3, [%r6+0]
mov %r0, 2
exit
