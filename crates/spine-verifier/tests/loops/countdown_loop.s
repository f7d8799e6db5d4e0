; while (--n) with n from the context
; expect: accept
ldxw %r1, [%r1+12]
mov %r0, 0
loop: jeq %r1, 0, out
sub %r1, 1
add %r0, 1
ja loop
out: and %r0, 3
exit
