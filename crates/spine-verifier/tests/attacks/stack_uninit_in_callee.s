; a callee reads its own frame, which holds another call's leftovers
; expect: UninitStack
call local f
mov %r0, 2
exit
f: ldxdw %r0, [%r10-16]
exit
