; reserves a ring-buffer record of a variable size
; expect: HelperSizeNotConst
call 7
and %r0, 63
mov %r2, %r0
lddw %r1, map[5]
mov %r3, 0
call 131
mov %r0, 2
exit
