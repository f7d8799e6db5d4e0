; for (;;) {}: never terminates; the watchdog ends it
; expect: accept
loop: ja loop
