; writes the kernel-owned value of a devmap entry
; expect: ReadOnlyMap
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[4]
call 1
jeq %r0, 0, out
stw [%r0+0], 1
out: mov %r0, 2
exit
