; a bpf-to-bpf callee that loops
; expect: accept
ldxw %r1, [%r1+12]
call local spin
mov %r0, 2
exit
spin: mov %r0, 0
loop: jeq %r1, 0, done
sub %r1, 1
add %r0, 3
ja loop
done: exit
