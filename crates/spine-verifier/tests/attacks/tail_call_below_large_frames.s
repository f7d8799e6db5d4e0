; a function tail-calls below a 320-byte caller frame
; expect: TailCallStack
mov %r6, %r1
stdw [%r10-320], 0
mov %r1, %r6
call local f
mov %r0, 2
exit
f: lddw %r2, map[3]
mov %r3, 0
call 12
mov %r0, 0
exit
