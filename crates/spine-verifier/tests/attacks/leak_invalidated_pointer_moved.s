; moves an invalidated packet pointer by a constant: it is no number to compute with
; expect: PointerPointerArith
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
add %r7, 4
mov %r0, 2
exit
