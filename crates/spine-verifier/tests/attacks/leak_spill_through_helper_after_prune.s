; a spilled packet pointer stays visible to a helper that reads it through a derived
; stack address past a prune point (the slot is live there, never forgotten)
; expect: PointerLeak
mov %r6, %r1
ldxw %r2, [%r1+0]
stxdw [%r10-8], %r2
ldxw %r7, [%r1+12]
jeq %r7, 0, l
mov %r0, 0
l: mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -16
mov %r4, 16
call 190
mov %r0, 2
exit
