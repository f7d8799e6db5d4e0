; an atomic add into .rodata
; expect: ReadOnlyMap
lddw %r1, map_value[2]+0
mov %r2, 1
lock add [%r1+0], %r2
mov %r0, 2
exit
