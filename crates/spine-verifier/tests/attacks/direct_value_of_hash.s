; takes a direct value address of a hash map
; expect: BadMapValueRef
lddw %r1, map_value[1]+0
mov %r0, 2
exit
