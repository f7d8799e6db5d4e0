; writes .rodata through its direct value address
; expect: ReadOnlyMap
lddw %r1, map_value[2]+0
stdw [%r1+0], 1
mov %r0, 2
exit
