; moves an invalidated packet pointer by a constant (allowed, as the kernel allows it:
; it stays an invalidated pointer, never a number) and returns it
; expect: PointerLeak
mov %r6, %r1
ldxw %r7, [%r6+0]
mov %r1, %r6
mov %r2, 4
call 44
add %r7, 4
mov %r0, %r7
exit
