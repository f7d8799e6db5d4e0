; slices with a size that is not a known constant (buffer__szk)
; expect: HelperSizeNotConst
mov %r6, %r1
mov %r2, 0
mov %r3, %r10
add %r3, -16
call 1397752065
call 7
and %r0, 7
mov %r4, %r0
mov %r1, %r10
add %r1, -16
mov %r2, 0
mov %r3, 0
call 1397752066
mov %r0, 2
exit
