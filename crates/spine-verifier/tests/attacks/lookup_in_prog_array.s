; looks up a program array
; expect: MapTypeMismatch
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[3]
call 1
mov %r0, 2
exit
