; atomically adds the frame pointer to a map value
; expect: PointerLeak
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[0]
call 1
jeq %r0, 0, out

lock add [%r0+0], %r10
out: mov %r0, 2
exit
