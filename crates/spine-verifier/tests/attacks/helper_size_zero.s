; bpf_trace_printk with an empty format
; expect: HelperSizeZero
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -8
mov %r2, 0
call 6
mov %r0, 2
exit
