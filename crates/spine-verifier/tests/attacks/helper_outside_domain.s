; calls bpf_redirect in a domain that allows only map lookups
; expect: HelperNotAllowed
; helpers: 1
mov %r1, 1
mov %r2, 0
call 23
exit
