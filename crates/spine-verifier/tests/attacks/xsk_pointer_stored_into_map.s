; an XSKMAP entry's address stored into an array map value
; expect: PointerLeak
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[16]
call 1
jeq %r0, 0, out
mov %r6, %r0
stw [%r10-8], 0
mov %r2, %r10
add %r2, -8
lddw %r1, map[0]
call 1
jeq %r0, 0, out
stxdw [%r0+0], %r6
out: mov %r0, 2
exit

