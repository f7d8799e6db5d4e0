; bpf_redirect_map through an array map
; expect: MapTypeMismatch
lddw %r1, map[0]
mov %r2, 0
mov %r3, 0
call 51
exit
