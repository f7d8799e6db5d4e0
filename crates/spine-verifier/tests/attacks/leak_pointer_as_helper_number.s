; passes a pointer where bpf_redirect takes an ifindex
; expect: PointerLeak
mov %r1, %r10
mov %r2, 0
call 23
exit
