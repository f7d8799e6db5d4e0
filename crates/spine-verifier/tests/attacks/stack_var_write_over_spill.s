; a variable-offset store may hit a spilled pointer that is read back later (a spill
; nothing reads again is forgotten at the prune point after the packet check)
; expect: VarOffsetOverSpill
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

stxdw [%r10-16], %r1
stdw [%r10-8], 0
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 8
mov %r6, %r10
add %r6, -16
add %r6, %r5
stdw [%r6+0], 0
ldxdw %r1, [%r10-16]
out: mov %r0, 2
exit
