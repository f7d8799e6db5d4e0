; passes a stack pointer as the timer
; expect: HelperArgType
mov %r1, %r10
add %r1, -16
stdw [%r10-16], 0
stdw [%r10-8], 0
call 172
mov %r0, 2
exit
