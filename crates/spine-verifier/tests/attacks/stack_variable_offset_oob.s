; a stack pointer moved by a 0..15 index may pass the frame pointer
; expect: StackOutOfBounds
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]

mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 15
mov %r6, %r10
add %r6, -8
add %r6, %r5
stb [%r6+0], 1
out: mov %r0, 2
exit
