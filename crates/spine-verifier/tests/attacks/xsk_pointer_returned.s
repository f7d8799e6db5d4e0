; an XSKMAP entry's address returned as the verdict
; expect: PointerLeak
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
exit
out: mov %r0, 2
exit

