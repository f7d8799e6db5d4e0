; no instructions at all
; expect: Isa(Empty)
; nothing
