; a checked value of one map compared with a nullable value of another: refused, as
; spine compares pointers of one region only
; expect: PointerComparison
stdw [%r10-8], 0
mov %r2, %r10
add %r2, -8
lddw %r1, map[1]
call 1
mov %r6, %r0
mov %r2, %r10
add %r2, -8
lddw %r1, map[0]
call 1
mov %r7, %r0
jeq %r6, 0, out
jne %r6, %r7, out
ldxw %r0, [%r7+0]
out: mov %r0, 2
exit
