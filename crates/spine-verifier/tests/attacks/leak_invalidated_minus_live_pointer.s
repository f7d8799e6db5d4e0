; subtracts a live packet pointer from an invalidated one: they point into different
; packets, and the difference would tell where the packet moved
; expect: PointerPointerArith
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
ldxw %r8, [%r6+0]
sub %r7, %r8
mov %r0, 2
exit
