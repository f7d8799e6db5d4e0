; a timer callback must return 0
; expect: AsyncCallbackReturn
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
lddw %r1, map[13]
call 1
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
add %r1, 8
.insn 0x0000000400004218
.insn 0
call 170
out: mov %r0, 2
exit
cb: mov %r0, 1
exit
