; an indirect call through a register
; expect: UnsupportedInsn
mov %r2, 5
call %r2
exit
