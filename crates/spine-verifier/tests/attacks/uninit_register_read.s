; copies a register nothing wrote
; expect: UninitRegister
mov %r0, %r3
exit
