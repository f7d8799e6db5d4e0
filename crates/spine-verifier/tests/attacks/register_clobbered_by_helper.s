; uses r1 after a helper call clobbered it
; expect: UninitRegister
mov %r1, 7
call 7
mov %r0, %r1
exit
