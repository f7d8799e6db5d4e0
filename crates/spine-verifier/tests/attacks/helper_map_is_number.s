; passes a number where a map is expected
; expect: HelperArgType
stw [%r10-4], 0
mov %r2, %r10
add %r2, -4
mov %r1, 0
call 1
mov %r0, 2
exit
