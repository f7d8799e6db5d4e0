; tail-calls through an array map
; expect: MapTypeMismatch
lddw %r2, map[0]
mov %r3, 0
call 12
mov %r0, 2
exit
