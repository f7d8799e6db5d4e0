; an outer loop of unknown count around an inner counted loop
; expect: accept
ldxw %r1, [%r1+12]
mov %r0, 0
outer: jeq %r1, 0, out
mov %r2, 0
inner: add %r0, %r2
add %r2, 1
jlt %r2, 16, inner
sub %r1, 1
ja outer
out: and %r0, 3
exit
