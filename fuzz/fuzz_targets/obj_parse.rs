//! The object loader and the verifier on arbitrary bytes: never a panic, and whatever
//! parses can be handed to the verifier (which must refuse or accept, never crash).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spine_runtime::{verify_program, LoadOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(obj) = spine_obj::parse(data) else { return };
    let opts = LoadOptions::default();
    for prog in &obj.programs {
        let _ = verify_program(&obj, prog, &opts);
    }
});
