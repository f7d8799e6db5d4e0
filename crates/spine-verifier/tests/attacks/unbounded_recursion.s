; a function that calls itself
; expect: CallTooDeep
call local f
mov %r0, 2
exit
f: call local f
exit
