; pops from a bloom filter, which has no pop (the kernel's check_map_func_compatibility)
; expect: MapTypeMismatch
mov %r2, %r10
add %r2, -8
lddw %r1, map[15]
call 88
mov %r0, 2
exit
