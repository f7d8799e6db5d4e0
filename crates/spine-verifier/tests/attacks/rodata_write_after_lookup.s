; writes a read-only map's value found by lookup
; expect: ReadOnlyMap
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[2]
call 1
jeq %r0, 0, out
stw [%r0+0], 1
out: mov %r0, 2
exit
