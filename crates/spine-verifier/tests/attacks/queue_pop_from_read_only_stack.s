; pops from a BPF_F_RDONLY_PROG stack ("write into map forbidden")
; expect: ReadOnlyMap
mov %r2, %r10
add %r2, -8
lddw %r1, map[12]
call 88
mov %r0, 2
exit
