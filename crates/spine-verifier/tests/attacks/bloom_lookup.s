; looks a value up in a bloom filter, which only push and peek may touch (the kernel's
; check_map_func_compatibility)
; expect: MapTypeMismatch
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[15]
call 1
mov %r0, 2
exit
