; stores the low half of data_end into a map value
; expect: PointerLeak
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov32 %r6, %r3
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

stxw [%r0+0], %r6
out: mov %r0, 2
exit
