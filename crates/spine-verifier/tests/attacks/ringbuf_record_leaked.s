; reserves a record and never submits it
; expect: UnreleasedReference
lddw %r1, map[5]
mov %r2, 16
mov %r3, 0
call 131
mov %r0, 2
exit
