; an XSKMAP entry passed to a helper as memory (the key of another map's lookup)
; expect: HelperArgType
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
mov %r2, %r0
lddw %r1, map[0]
call 1
out: mov %r0, 2
exit

