; looks a key up in a queue, which has none (the kernel's check_map_func_compatibility)
; expect: MapTypeMismatch
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[11]
call 1
mov %r0, 2
exit
