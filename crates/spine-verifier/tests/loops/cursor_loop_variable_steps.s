; a cursor advanced by a variable length (1 to 8 bytes, read from the packet) in a loop
; of four iterations, each checking the two bytes it reads against the end: the cursor
; keeps a bounded offset only if the loop is unrolled, as the kernel does
; expect: accept
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r6, 4
loop: mov %r4, %r2
add %r4, 2
jgt %r4, %r3, out
ldxb %r5, [%r2+1]
and %r5, 7
add %r5, 1
add %r2, %r5
sub %r6, 1
jne %r6, 0, loop
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r0, [%r2+0]
and %r0, 2
exit
out: mov %r0, 2
exit
