; a billion iterations
; expect: accept
mov %r0, 0
mov %r1, 0
loop: add %r0, %r1
add %r1, 1
jlt %r1, 1000000000, loop
and %r0, 3
exit
