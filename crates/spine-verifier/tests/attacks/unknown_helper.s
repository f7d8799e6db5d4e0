; calls a helper number the kernel does not have
; expect: UnknownHelper
call 9999
exit
