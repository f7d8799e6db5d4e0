; exits without setting r0
; expect: UninitRegister
mov %r1, 0
exit
