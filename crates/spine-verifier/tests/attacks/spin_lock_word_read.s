; reads the lock word through an unaligned wide load that overlaps it
; expect: SpinLockAccess
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[9]
call 1
jeq %r0, 0, out
ldxw %r0, [%r0+2]
out: mov %r0, 2
exit
