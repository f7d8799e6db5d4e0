; for (;;) counter++
; expect: accept
mov %r0, 0
loop: add %r0, 1
ja loop
