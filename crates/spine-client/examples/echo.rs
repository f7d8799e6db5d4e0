//! An application and an adapter thread in one process: the adapter hands the endpoint
//! over a socketpair, echoes what the application sends, and wakes it on delivery.
//! `cargo run -p spine-client --example echo`

use std::os::unix::net::UnixStream;

use spine_client::{Endpoint, EventFd, Layout};
use spine_endpoint::{send_fds, AdapterEnd};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (adapter_sock, app_sock) = UnixStream::pair()?;
    let adapter = std::thread::spawn(move || -> Result<u64, spine_endpoint::EndpointError> {
        let mut end = AdapterEnd::create(Layout::new(64, 2048, 128)?)?;
        let wake = EventFd::new()?;
        send_fds(&adapter_sock, &[end.shm().fd(), wake.fd()])?;
        let mut buf = [0u8; 2048];
        let mut echoed = 0;
        while echoed < 1000 {
            if let Some(n) = end.take(&mut buf) {
                while !end.deliver(&buf[..n]) {
                    std::thread::yield_now();
                }
                wake.signal();
                echoed += 1;
            }
        }
        Ok(echoed)
    });
    let mut ep = Endpoint::from_socket(&app_sock)?;
    for i in 0..1000u32 {
        while !ep.send_with(64, |b| b[..4].copy_from_slice(&i.to_le_bytes())) {}
        let mut got = 0;
        while got == 0 {
            got = ep.recv_blocking(1, 1000, |m| assert_eq!(m[..4], i.to_le_bytes()))?;
        }
    }
    println!("1000 messages echoed: {}", adapter.join().unwrap()? == 1000);
    Ok(())
}
