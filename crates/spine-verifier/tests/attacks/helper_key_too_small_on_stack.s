; an 8-byte hash key read from a 4-byte slot at fp-4
; expect: StackOutOfBounds
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[1]
call 1
mov %r0, 2
exit
