; for (i = 0; i < 64; i++) { if (pad + i + 1 > end) break; pad[i] = 0; } as clang rotates it
; expect: accept
ldxw %r6, [%r1+0]
ldxw %r7, [%r1+4]
mov %r1, %r6
add %r1, 1
jgt %r1, %r7, out
mov %r3, 0
loop: mov %r5, %r6
add %r5, %r3
stb [%r5+0], 0
jgt %r3, 62, out
add %r3, 1
add %r5, 2
jle %r5, %r7, loop
out: mov %r0, 2
exit
