; hands .rodata to bpf_fib_lookup, which writes its argument
; expect: ReadOnlyMap
mov %r6, %r1
lddw %r2, map_value[2]+0
mov %r1, %r6
mov %r3, 32
mov %r4, 0
call 69
mov %r0, 2
exit
